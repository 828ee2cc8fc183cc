package n8ncheck

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// The workflows `devtool n8n-check` imports into n8n. Each starts with a
// Webhook node at /webhook/PATH and, as a workflow replacing a side-effect
// node should, passes the delivery's Idempotency-Key on to the API it calls:
// here the check's own recorder, which performs one effect per key.

// Node versions the check builds its workflows with: the newest of n8n
// 1.123.81, the ones docs/n8n.md was checked with.
const (
	webhookVersion     = 2.1
	httpRequestVersion = 4.2
	respondVersion     = 1.5
	waitVersion        = 1.1
)

// n8nCredentialID is the Header Auth credential of the worked example's workflow.
const n8nCredentialID = "hgcheckcred00001"

// checkWorkflow is one workflow of the check.
type checkWorkflow struct {
	id, name, path string
	// respond is the Webhook node's Respond option: lastNode (When Last
	// Node Finishes), responseNode (Using 'Respond to Webhook' Node) or
	// onReceived (Immediately).
	respond string
	// waitSeconds, when above zero, puts a Wait node before the call.
	waitSeconds int
	// headerAuth guards the Webhook node with the Header Auth credential.
	headerAuth bool
	// method is the Webhook node's HTTP method; POST when empty.
	method string
	// noCall makes a workflow of the Webhook node alone (the probe).
	noCall bool
	// saveNothing keeps n8n from saving its executions (the probe's polls).
	saveNothing bool
	// respondBody is what a Respond to Webhook node answers; {"done": true}
	// when empty.
	respondBody string
}

// checkWorkflows are the check's workflows. Each but the probe calls the
// check's recorder at /effect/PATH.
func checkWorkflows() []checkWorkflow {
	return []checkWorkflow{
		{id: "hgcheckdupl00001", name: "hookgate check: duplicates", path: "hg-duplicates", respond: "lastNode"},
		{id: "hgcheckfail00001", name: "hookgate check: failing call", path: "hg-failing", respond: "lastNode"},
		{id: "hgcheckresp00001", name: "hookgate check: Respond to Webhook after a failing call", path: "hg-respond-node", respond: "responseNode"},
		{id: "hgcheckslws00001", name: "hookgate check: 4s workflow, 3s timeout", path: "hg-slow-short", respond: "lastNode", waitSeconds: 4},
		{id: "hgcheckslwl00001", name: "hookgate check: 4s workflow, 15s timeout", path: "hg-slow-long", respond: "lastNode", waitSeconds: 4},
		{id: "hgcheckrsta00001", name: "hookgate check: restart, retry_statuses [404]", path: "hg-restart", respond: "lastNode"},
		{id: "hgcheckrstp00001", name: "hookgate check: restart, no retry_statuses", path: "hg-restart-plain", respond: "lastNode"},
		{id: "hgcheckrstz00001", name: "hookgate check: planned restart, route paused", path: "hg-restart-paused", respond: "lastNode"},
		// docs/n8n.md's recommended setting: the last node answers the
		// API's {"ok": true}, and the route's success reads it.
		{id: "hgcheckrsts00001", name: "hookgate check: restart, success .body.ok", path: "hg-restart-success", respond: "lastNode"},
		{id: "hgcheckreso00001", name: "hookgate check: Respond to Webhook {ok: true} after a call that fails twice", path: "hg-respond-success",
			respond: "responseNode", respondBody: `{"ok": true}`},
		{id: "hgcheckpaid00001", name: "hookgate check: checkout paid (docs/n8n.md)", path: "checkout-paid", respond: "lastNode", headerAuth: true},
		// Last: n8n activates workflows in this order, so once the probe
		// answers, every other webhook is registered too.
		{id: "hgcheckprobe0001", name: "hookgate check: probe", path: "hg-probe", respond: "onReceived", method: "GET", noCall: true, saveNothing: true},
	}
}

// uuidFor makes a fixed, valid UUID for node n of workflow w, so that
// imports are repeatable.
func uuidFor(w, n int) string {
	return fmt.Sprintf("6b1f0c2e-8d4a-4f3b-9c1d-%06d%06d", w, n)
}

// n8nWorkflowsJSON renders workflows as the file `n8n import:workflow
// --input` reads.
func n8nWorkflowsJSON(workflows []checkWorkflow, effectURL string) ([]byte, error) {
	type conn struct {
		Node  string `json:"node"`
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	var out []map[string]any
	for wi, w := range workflows {
		method := w.method
		if method == "" {
			method = "POST"
		}
		hook := map[string]any{
			"id": uuidFor(wi, 0), "name": "Webhook", "type": "n8n-nodes-base.webhook",
			"typeVersion": webhookVersion, "position": []int{0, 0}, "webhookId": uuidFor(wi, 100),
			"parameters": map[string]any{"httpMethod": method, "path": w.path, "responseMode": w.respond, "options": map[string]any{}},
		}
		if w.headerAuth {
			hook["parameters"].(map[string]any)["authentication"] = "headerAuth"
			hook["credentials"] = map[string]any{"httpHeaderAuth": map[string]string{"id": n8nCredentialID, "name": "hookgate token"}}
		}
		nodes := []map[string]any{hook}
		connections := map[string]any{}
		link := func(from, to string) {
			connections[from] = map[string]any{"main": [][]conn{{{Node: to, Type: "main"}}}}
		}
		prev := "Webhook"
		if w.waitSeconds > 0 {
			nodes = append(nodes, map[string]any{
				"id": uuidFor(wi, 1), "name": "Wait", "type": "n8n-nodes-base.wait", "typeVersion": waitVersion,
				"position": []int{250, 0}, "webhookId": uuidFor(wi, 101),
				"parameters": map[string]any{"resume": "timeInterval", "amount": w.waitSeconds, "unit": "seconds"},
			})
			link(prev, "Wait")
			prev = "Wait"
		}
		if !w.noCall {
			nodes = append(nodes, map[string]any{
				"id": uuidFor(wi, 2), "name": "Call the API", "type": "n8n-nodes-base.httpRequest", "typeVersion": httpRequestVersion,
				"position": []int{500, 0},
				"parameters": map[string]any{
					"method": "POST", "url": effectURL + "/effect/" + w.path,
					"sendHeaders": true,
					"headerParameters": map[string]any{"parameters": []map[string]string{
						{"name": "Idempotency-Key", "value": `={{ $('Webhook').item.json.headers["idempotency-key"] }}`},
					}},
					"sendBody": true, "specifyBody": "json",
					"jsonBody": `={{ JSON.stringify($('Webhook').item.json.body) }}`,
					"options":  map[string]any{},
				},
			})
			link(prev, "Call the API")
			prev = "Call the API"
		}
		if w.respond == "responseNode" {
			nodes = append(nodes, map[string]any{
				"id": uuidFor(wi, 3), "name": "Respond to Webhook", "type": "n8n-nodes-base.respondToWebhook",
				"typeVersion": respondVersion, "position": []int{750, 0},
				"parameters": map[string]any{"respondWith": "json", "responseBody": cmp.Or(w.respondBody, `{"done": true}`), "options": map[string]any{}},
			})
			link(prev, "Respond to Webhook")
		}
		settings := map[string]any{"executionOrder": "v1"}
		if w.saveNothing {
			settings["saveDataSuccessExecution"] = "none"
			settings["saveDataErrorExecution"] = "none"
			settings["saveManualExecutions"] = false
		}
		out = append(out, map[string]any{
			"id": w.id, "name": w.name, "active": false, "nodes": nodes, "connections": connections,
			"settings": settings, "pinData": map[string]any{},
		})
	}
	return json.MarshalIndent(out, "", "  ")
}

// n8nCredentialsJSON renders the worked example's Header Auth credential
// for `n8n import:credentials --input`, which encrypts its data with the
// instance's key.
func n8nCredentialsJSON(header, token string) ([]byte, error) {
	return json.Marshal([]map[string]any{{
		"id": n8nCredentialID, "name": "hookgate token", "type": "httpHeaderAuth",
		"data": map[string]string{"name": header, "value": token},
	}})
}

// importWorkflows imports the check's workflows and credential into n8n,
// which must be stopped then, and activates the workflows.
func (r *n8nCheckRun) importWorkflows(ctx context.Context) error {
	// n8n: its workflows and credential, imported while it is stopped.
	n8nEnv, err := n8nEnvironment(r.n8nURL, filepath.Join(r.work, "home"), r.n8nAddr, r.brokerAddr)
	if err != nil {
		return err
	}
	r.n8nEnv = n8nEnv
	r.n8nBin = filepath.Join(r.dir, "node_modules", ".bin", "n8n")
	wfJSON, err := n8nWorkflowsJSON(checkWorkflows(), r.apiURL)
	if err != nil {
		return err
	}
	credJSON, err := n8nCredentialsJSON("X-Hookgate-Token", r.secrets["N8N_WEBHOOK_TOKEN"])
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.work, "workflows.json"), wfJSON, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.work, "credentials.json"), credJSON, 0o600); err != nil {
		return err
	}
	for _, step := range [][]string{
		{"import:credentials", "--input=" + filepath.Join(r.work, "credentials.json")},
		{"import:workflow", "--input=" + filepath.Join(r.work, "workflows.json")},
		{"update:workflow", "--all", "--active=true"},
	} {
		r.con.Printf("n8n-check", "n8n %s", step[0]+" "+strings.Join(step[1:], " "))
		if err := devlocal.RunOnce(ctx, r.logs, 30*time.Second, "n8n "+step[0], r.n8nBin, step, r.n8nEnv); err != nil {
			return fmt.Errorf("n8n %s failed (see %s): %w", step[0], r.logPath, err)
		}
	}
	// The credential holds the token in the clear; n8n keeps it encrypted.
	if err := os.Remove(filepath.Join(r.work, "credentials.json")); err != nil {
		return err
	}
	return nil
}

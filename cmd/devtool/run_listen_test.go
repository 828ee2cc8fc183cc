package main

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/devlocal"
	"github.com/hookgate/hookgate/internal/devsecret"
	"github.com/hookgate/hookgate/internal/proctest"
)

// listening returns the addresses the sockets listening on TCP port are
// bound to, from the kernel's tables (/proc/net/tcp and tcp6): what a
// client on the network could reach, whatever the processes say.
func listening(t *testing.T, port int) []string {
	t.Helper()
	var addrs []string
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			hostHex, portHex, ok := strings.Cut(fields[1], ":")
			p, err := strconv.ParseUint(portHex, 16, 16)
			if !ok || err != nil || int(p) != port {
				continue
			}
			raw, err := hex.DecodeString(hostHex)
			require.NoError(t, err)
			// Each 32-bit word is in the host's (little-endian) order.
			for i := 0; i+4 <= len(raw); i += 4 {
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			addrs = append(addrs, net.IP(raw).String())
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	return addrs
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// TestRunListensOnLoopback: `devtool run` (what `make run` runs), with the
// example config, whose listen addresses are ":PORT", starts ingest, the
// worker and the demo receiver listening on 127.0.0.1 only, as its banner
// says: the console and the password the banner prints are not reachable
// from the network. Before, ingest and the worker listened on every
// interface. HOOKGATE_RUN_HOST or --host moves them.
func TestRunListensOnLoopback(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
		"github.com/hookgate/hookgate/cmd/ingest", "github.com/hookgate/hookgate/cmd/worker").CombinedOutput()
	require.NoError(t, err, "building ingest and worker: %s", out)
	db := dbtest.NewDB(t)

	example, err := os.ReadFile("../../hookgate.example.yaml")
	require.NoError(t, err)
	ingestPort, workerPort := portOf(t, proctest.FreeAddr(t)), portOf(t, proctest.FreeAddr(t))
	receiver := proctest.FreeAddr(t)
	// Free ports are picked one by one and may repeat: three distinct ones.
	for workerPort == ingestPort || portOf(t, receiver) == ingestPort || portOf(t, receiver) == workerPort {
		workerPort, receiver = portOf(t, proctest.FreeAddr(t)), proctest.FreeAddr(t)
	}
	cfgText := strings.NewReplacer(`listen: ":8080"`, `listen: ":`+strconv.Itoa(ingestPort)+`"`,
		`listen: ":9091"`, `listen: ":`+strconv.Itoa(workerPort)+`"`, "127.0.0.1:9099", receiver).Replace(string(example))
	require.Contains(t, cfgText, `listen: ":`+strconv.Itoa(workerPort)+`"`, "the example config listens on every interface")
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfgText), 0o600))

	getenv := func(string) string { return "" }
	o, err := parseRunOptions([]string{"--config", cfgPath, "--bin", binDir}, getenv, os.Stderr)
	require.NoError(t, err)
	o.self, o.receiverListen, o.receiverURL = os.Args[0], receiver, "http://"+receiver
	consoleEnv, _, err := devsecret.Console(o.cfg, getenv, t.TempDir())
	require.NoError(t, err)
	env := append(runEnv(getenv, db.URL, demoSecrets(o.cfg, getenv), consoleEnv), asMain+"=1")

	var logs proctest.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("processes:\n%s", logs.String())
		}
	})
	sup := devlocal.NewSupervisor(devlocal.NewConsole(&logs), 30*time.Second)
	t.Cleanup(func() { require.NoError(t, sup.StopAll()) })
	children := o.children()
	require.NoError(t, startChildren(sup, children, env))
	require.NoError(t, waitChildren(t.Context(), sup, children))

	for name, port := range map[string]int{"ingest": ingestPort, "worker": workerPort, "receiver": portOf(t, receiver)} {
		require.Equal(t, []string{"127.0.0.1"}, listening(t, port), "%s listens on the loopback only", name)
	}
}

// TestRunHost: --host, or HOOKGATE_RUN_HOST, puts ingest and the worker
// on another host, on the config's ports; the receiver stays on the
// loopback.
func TestRunHost(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	for _, name := range []string{"ingest", "worker"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o700))
	}
	cfgPath := filepath.Join(t.TempDir(), "hookgate.yaml")
	example, err := os.ReadFile("../../hookgate.example.yaml")
	require.NoError(t, err)
	ingestPort, workerPort := portOf(t, proctest.FreeAddr(t)), portOf(t, proctest.FreeAddr(t))
	require.NoError(t, os.WriteFile(cfgPath, []byte(strings.NewReplacer(`listen: ":8080"`, `listen: ":`+strconv.Itoa(ingestPort)+`"`,
		`listen: ":9091"`, `listen: ":`+strconv.Itoa(workerPort)+`"`).Replace(string(example))), 0o600))
	listens := func(o *runOptions) map[string]string {
		got := map[string]string{}
		for _, c := range o.children() {
			got[c.name] = c.args[len(c.args)-1]
		}
		return got
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		host string
	}{
		{"Default", nil, nil, "127.0.0.1"},
		{"Env", nil, map[string]string{"HOOKGATE_RUN_HOST": "0.0.0.0"}, "0.0.0.0"},
		{"FlagOverEnv", []string{"--host", "127.0.0.2"}, map[string]string{"HOOKGATE_RUN_HOST": "0.0.0.0"}, "127.0.0.2"},
	} {
		o, err := parseRunOptions(append([]string{"--config", cfgPath, "--bin", bin}, tt.args...),
			func(k string) string { return tt.env[k] }, os.Stderr)
		require.NoError(t, err, tt.name)
		require.Equal(t, map[string]string{
			"ingest":   net.JoinHostPort(tt.host, strconv.Itoa(ingestPort)),
			"worker":   net.JoinHostPort(tt.host, strconv.Itoa(workerPort)),
			"receiver": receiverAddr,
		}, listens(o), tt.name)
	}
}

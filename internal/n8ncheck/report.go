package n8ncheck

import (
	"fmt"
	"io"
	"strings"
)

// verdict says whether a scenario went as docs/n8n.md says.
type verdict int

const (
	verdictOK verdict = iota
	verdictFailed
	// verdictShown: a comparison, with nothing expected of it.
	verdictShown
)

// n8nRow is one line of the check's table.
type n8nRow struct {
	scenario, hookgate, executions, effects string
	verdict                                 verdict
}

// markdownTable renders rows as the Markdown table the check prints.
func markdownTable(rows []n8nRow) string {
	var b strings.Builder
	b.WriteString("| scenario | hookgate | n8n executions | effects downstream | as the guide says |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		v := map[verdict]string{verdictOK: "yes", verdictFailed: "**NO**", verdictShown: "(comparison)"}[r.verdict]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.scenario, r.hookgate, r.executions, r.effects, v)
	}
	return b.String()
}

// total and describe summarise execution counts.
func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func describeExecutions(m map[string]int) string {
	if total(m) == 0 {
		return "0"
	}
	var parts []string
	for _, s := range []string{"success", "error", "crashed", "canceled"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	return fmt.Sprintf("%d (%s)", total(m), strings.Join(parts, ", "))
}

// okIf is verdictOK when b holds and verdictFailed otherwise: the verdict
// of a scenario with an expected outcome.
func okIf(b bool) verdict {
	if b {
		return verdictOK
	}
	return verdictFailed
}

// report prints the check's table, and the worked example's claim as
// `worker claims show` prints it, and fails the check when a scenario did
// not go as docs/n8n.md says.
func (r *n8nCheckRun) report(stdout io.Writer, c *n8nChecker, rows []n8nRow) error {
	fmt.Fprintf(stdout, "\nn8n %s on Node %s; executions counted in n8n's execution_entity table:\n\n", n8nVersion, c.nodeVersion())
	fmt.Fprint(stdout, markdownTable(rows))
	if c.claimsShow != "" {
		fmt.Fprintf(stdout, "\nthe worked example's event, as `worker claims show` prints it:\n\n%s", c.claimsShow)
	}
	var failed []string
	for _, row := range rows {
		if row.verdict == verdictFailed {
			failed = append(failed, row.scenario)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d scenario(s) did not go as docs/n8n.md says: %s (logs: %s)", len(failed), strings.Join(failed, "; "), r.logPath)
	}
	fmt.Fprintf(stdout, "\nevery scenario went as docs/n8n.md says (logs: %s)\n", r.logPath)
	return nil
}

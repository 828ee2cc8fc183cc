package lab

import "fmt"

// labWhy says in one sentence why a cell came out as measured. Each design
// and scenario has the explanation of its usual outcome; when a run measures
// something else, the sentence says what was measured instead of the
// usual story.
func labWhy(r labResult) string {
	if r.failure != "" {
		return "Not measured: " + r.failure + "."
	}
	usual, ok := labUsual[[2]string{r.design, r.scenario}]
	if ok && usual.duplicates == (r.duplicates > 0) && usual.lost == (r.lost > 0) {
		if r.scenario == scenarioCopies {
			return fmt.Sprintf(usual.why, r.copies, r.tally.effects)
		}
		return usual.why
	}
	return fmt.Sprintf("Unusually for this design, this run measured %d effect(s) for %d call(s) (%d answered by key without an effect), acked %t, its record done %t.",
		r.tally.effects, r.tally.calls, r.tally.deduped, r.acked, r.completed)
}

// labOutcome is a cell's usual outcome and why.
type labOutcome struct {
	duplicates, lost bool
	why              string
}

// labUsual holds the explanation of each cell's usual outcome. Those of the
// copies scenario take the number of copies and of effects.
var labUsual = map[[2]string]labOutcome{
	{designLookup, scenarioCopies}:      {true, false, "%d copies each looked the event up before the first had inserted it, so %d effects ran; the insert after the effect comes too late to stop them."},
	{designLookup, scenarioLostAck}:     {false, false, "The first delivery had inserted the event, so the retry found it and was acknowledged without an effect."},
	{designLookup, scenarioCrashBefore}: {false, false, "Nothing had been inserted before the crash, so the retry found nothing and ran the effect: a lookup loses nothing here."},
	{designLookup, scenarioCrashAfter}:  {true, false, "The effect ran but the process died before its insert, so the retry found nothing and ran the effect again."},

	{designSeen, scenarioCopies}:      {false, false, "The atomic claim let one of the %d copies through (%d effect); the others found the flag and were acknowledged."},
	{designSeen, scenarioLostAck}:     {false, false, "The retry found the flag and was acknowledged without an effect."},
	{designSeen, scenarioCrashBefore}: {false, true, "The flag was committed before the crash; the retry found it and was acknowledged, so the effect never ran: a seen flag loses the event."},
	{designSeen, scenarioCrashAfter}:  {false, false, "The effect had run before the crash and the retry found the flag, so nothing was lost, only because the crash fell after the effect; the claim stays unfinished."},

	{designLease, scenarioCopies}:      {false, false, "The atomic claim let one of the %d copies through (%d effect); the others were told to retry and then found it done."},
	{designLease, scenarioLostAck}:     {false, false, "The retry found the claim done and was acknowledged without an effect."},
	{designLease, scenarioCrashBefore}: {false, false, "The dead process's lease ran out, and the provider's next retry took the claim over and ran the effect."},
	{designLease, scenarioCrashAfter}:  {true, false, "The lease ran out and the retry took the claim over; without a key the downstream could not tell the second call from the first, so the effect ran twice."},

	{designLeaseKey, scenarioCopies}:      {false, false, "The atomic claim let one of the %d copies through (%d effect); the others were told to retry and then found it done."},
	{designLeaseKey, scenarioLostAck}:     {false, false, "The retry found the claim done and was acknowledged without an effect."},
	{designLeaseKey, scenarioCrashBefore}: {false, false, "The dead process's lease ran out, and the provider's next retry took the claim over and ran the effect."},
	{designLeaseKey, scenarioCrashAfter}:  {false, false, "The retry took the claim over and called again with the same Idempotency-Key, which the downstream answered without a second effect."},

	{designHookgate, scenarioCopies}:      {false, false, "Ingest's claim let one of the %d copies through and queued one job with it (%d effect); the others were answered as duplicates."},
	{designHookgate, scenarioLostAck}:     {false, false, "Ingest had committed the claim with its job before answering, so the retry was answered as a duplicate and the one job delivered once."},
	{designHookgate, scenarioCrashBefore}: {false, false, "The provider was acknowledged before the worker died; River rescued the running job after rescue_after and a new worker delivered it."},
	{designHookgate, scenarioCrashAfter}:  {false, false, "River rescued the job and a new worker called again with the same Idempotency-Key, which the downstream answered without a second effect."},
}

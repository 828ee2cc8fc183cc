package claim

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
)

// claimArgs are claimManySQL's per-route arguments for ev and routes, and the
// message of the first route whose business key is missing (the claim's
// last_error), with routes ordered by name so that concurrent claims take
// their keys' locks in one order. waits[i] is the JSON array of the
// predecessors routes[i] waits for, ancestors[i] that of all the routes it
// runs after, directly or not (a predecessor skipped anywhere up the chain
// skips it too); both only among routes, "[]" for none.
func claimArgs(ev Event, routes []string) (names []string, hashes [][]byte, keys, missing []*string, firstMissing *string,
	waits, ancestors []string,
) {
	byRoute := make(map[string]BusinessKey, len(ev.BusinessKeys))
	for _, k := range ev.BusinessKeys {
		byRoute[k.Route] = k
	}
	names = slices.Sorted(slices.Values(routes))
	hashes, keys, missing = make([][]byte, len(names)), make([]*string, len(names)), make([]*string, len(names))
	waits, ancestors = make([]string, len(names)), make([]string, len(names))
	for i, r := range names {
		k, ok := byRoute[r]
		switch {
		case !ok:
		case k.Missing != "":
			missing[i] = &k.Missing
			if firstMissing == nil {
				firstMissing = &k.Missing
			}
		default:
			sum := sha256.Sum256([]byte(k.Key))
			hashes[i], keys[i] = sum[:], &k.Key
		}
		w, a := chain(ev.After, names, r)
		waits[i], ancestors[i] = jsonList(w), jsonList(a)
	}
	return names, hashes, keys, missing, firstMissing, waits, ancestors
}

// chain returns the predecessors of route in after that are among names
// (sorted), and all its ancestors among them, each once. A cycle (which the
// configuration refuses) ends the walk rather than looping.
func chain(after map[string][]string, names []string, route string) (preds, ancestors []string) {
	among := func(r string) bool { _, ok := slices.BinarySearch(names, r); return ok }
	for _, p := range after[route] {
		if among(p) && !slices.Contains(preds, p) {
			preds = append(preds, p)
		}
	}
	seen := map[string]bool{route: true}
	queue := slices.Clone(preds)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		ancestors = append(ancestors, p)
		for _, q := range after[p] {
			if among(q) && !seen[q] {
				queue = append(queue, q)
			}
		}
	}
	slices.Sort(preds)
	slices.Sort(ancestors)
	return preds, ancestors
}

// jsonList encodes names as a JSON array of strings.
func jsonList(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(names) // strings always encode
	return string(b)
}

// plan is what finishing a won claim takes.
type plan struct {
	res     Result
	enqueue []string // the routes that get a job
	waiting []string // the routes that wait for others, with no job
	// settle: no delivery is left to run, so the claim's status must be
	// set to res.Status (ignored when all were skipped, else failed).
	settle bool
}

// fanOutPlan decides a won claim's result from its routes (names, sorted),
// their missing business keys, the routes skipped and what each waits for
// (claimArgs' JSON arrays; nil for none), given the status it was inserted
// with. A claim whose routes are all skipped, failed or waiting has none to
// run: waiting ones can be left only behind a failed one, so it is failed.
func fanOutPlan(names []string, missing []*string, skipped, waits []string, status Status) plan {
	var p plan
	for i, r := range names {
		switch {
		case missing[i] != nil:
			p.res.Unkeyed = append(p.res.Unkeyed, r)
		case slices.Contains(skipped, r):
		case waits != nil && waits[i] != "[]":
			p.waiting = append(p.waiting, r)
		default:
			p.enqueue = append(p.enqueue, r)
		}
	}
	p.res.Decision, p.res.Deliveries, p.res.Skipped = Claimed, len(p.enqueue), skipped
	switch {
	case status == Ignored:
		p.res.Decision = ClaimedIgnored
	case len(p.enqueue) == 0:
		p.settle = true
		status = Ignored
		if len(p.res.Unkeyed) > 0 || len(p.waiting) > 0 {
			status = Failed
		}
	}
	p.res.Status = status
	return p
}

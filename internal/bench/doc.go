// Package bench holds hookgate's end-to-end benchmarks. Each measures our
// path beside a baseline run in the same invocation on the same database, so
// that the figures are read as ratios on noisy, shared machines.
//
//	make bench
package bench

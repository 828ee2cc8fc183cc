package route

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"
)

// runOnce compiles src as routes[0].body and runs it over input, returning
// its values or its error.
func runOnce(t *testing.T, src, input string) ([]any, error) {
	t.Helper()
	return runWithin(t, 0, src, input)
}

// runWithin is runOnce with the evaluation's time bound (zero: EvalTimeout).
func runWithin(t *testing.T, timeout time.Duration, src, input string) ([]any, error) {
	t.Helper()
	p, err := compile("routes[0].body", src, false)
	require.NoError(t, err)
	p.timeout = timeout
	doc, err := decode([]byte(input))
	require.NoError(t, err)
	var out []any
	err = p.run(context.Background(), doc, len(input), map[string]any{"id": "evt_1"}, nil, func(v any) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// Each growing form fails with the bound it passed, before it allocates
// past it: the process allocates a small multiple of the bound at most.
func TestBoundsHold(t *testing.T) {
	// Few steps reach the bounds with a 16 KiB string. Each evaluation
	// has a minute rather than a route's second, so that the bound, not
	// the time cut, stops each program however busy the machine: on a
	// 2-core machine running the other packages' tests, StringDoubling once
	// took over the second.
	big := strings.Repeat("x", 16<<10)
	input := `{"s":"` + big + `","k":1e8,"n":40,"path":[100000000]}`
	const (
		value   = "routes[0].body: builds a value over the bound of 16.1 MiB (16 MiB plus 4 bytes per input byte)"
		collect = "routes[0].body: builds more than 16.1 MiB of arrays and assigned values in one evaluation (16 MiB plus 4 bytes per input byte)"
		repeat  = "routes[0].body: repeats a string beyond the bound of 16.1 MiB (16 MiB plus 4 bytes per input byte)"
		index   = "routes[0].body: uses an array index over 1048576"
	)
	for _, tt := range []struct{ name, program, want string }{
		{"ConstantRepetition", `("x" * 300000000 | length) > 0`, repeat},
		{"RepetitionFromTheBody", `.s * .k`, repeat},
		{"RepetitionTheOtherWay", `.k * .s`, repeat},
		{"RepetitionAssigned", `.s *= .k`, repeat},
		{"StringDoubling", `reduce range(.n) as $i (.s; . + .)`, value},
		{"StringDoublingAssigned", `reduce range(.n) as $i (.; .s += .s)`, value},
		{"InterpolationDoubling", `reduce range(.n) as $i (.s; "\(.)\(.)")`, value},
		{"ArrayDoubling", `reduce range(.n) as $i ([.s]; . + .)`, value},
		{"SharedObjectDoubling", `reduce range(.n) as $i (.s; {a: ., b: .}) | tojson | length`, value},
		{"ObjectMergeDoubling", `reduce range(.n) as $i ({a: .s}; {b: .} * {c: .})`, value},
		{"Collection", `.s as $s | [range(.k) | $s + "x"] | length`, collect},
		{"CollectionOfShared", `.s as $s | [range(.k) | $s] | length`, collect},
		{"MapOfShared", `.s as $s | [range(2000)] | map($s) | tojson | length`, collect},
		{"AssignShared", `.s as $s | [range(2000)] | .[] = $s | tojson | length`, collect},
		{"UpdateShared", `.s as $s | [range(2000)] | .[] |= $s | tojson | length`, collect},
		{"Combinations", `.k as $k | [.s] | combinations($k) | length`, collect},
		{"GsubGrowth", `(.s * 600) as $b | .s[:4] | gsub(""; $b)`, value},
		{"IndexFromTheBody", `.[.k] = 1`, index},
		{"SetpathFromTheBody", `setpath(.path; 1)`, index},
		{"FromstreamFromTheBody", `fromstream([.path, 1], [.path])`, index},
		{"BigNumbers", `reduce range(.n) as $i (3; . * .) | tostring | length`, "routes[0].body: multiplies numbers beyond 65536 bits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := runWithin(t, time.Minute, tt.program, input)
			runtime.ReadMemStats(&after)
			require.EqualError(t, err, tt.want)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(160<<20), "allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)
		})
	}
}

// The bound grows with the input, so that a large body can be reshaped.
// Building 18 MiB under the race detector on a busy machine can take over
// the second a route's program is given, which is not what this tests: the
// evaluation here has a minute.
func TestBoundScalesWithTheInput(t *testing.T) {
	t.Parallel()
	input := `{"s":"` + strings.Repeat("x", 6<<20) + `"}`
	out, err := runWithin(t, time.Minute, `{a: .s, b: .s, c: .s} | [.a, .b, .c] | add | length`, input)
	require.NoError(t, err)
	require.Equal(t, []any{18 << 20}, out)
}

// What the program cannot do safely is refused when the config loads,
// naming the key.
func TestProgramsRefusedAtLoad(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ program, want string }{
		{`def f: [f]; f`, "routes[0].body: defines f recursively: a program may not recurse, since the depth, and with it the memory, could come from a body"},
		{`def f(g): g | f(g); f(.)`, "routes[0].body: defines f recursively: a program may not recurse, since the depth, and with it the memory, could come from a body"},
		{`def a: def b: a; b; a`, "routes[0].body: defines b recursively: a program may not recurse, since the depth, and with it the memory, could come from a body"},
		{`.[100000000] = 1`, "routes[0].body: uses the array index 100000000, over the 1048576 allowed"},
		{`def _hg_sized($b): .; {a: 1}`, "routes[0].body: defines _hg_sized: names starting with _hg_ are reserved"},
		{`$__hg`, "routes[0].body: uses $__hg: names starting with _hg_ or $__hg are reserved"},
		{`. as $__hg_u | 1`, "routes[0].body: binds $__hg_u: names starting with $__hg are reserved"},
	} {
		_, err := compile("routes[0].body", tt.program, false)
		require.EqualError(t, err, tt.want, tt.program)
	}
}

// The rewrite changes what programs may build, not what they yield: each
// of these gives what gojq gives for the program as written.
func TestRewriteKeepsMeaning(t *testing.T) {
	t.Parallel()
	input := `{"a":1,"b":"two","c":[3,1,2],"d":{"x":{"y":1}},"e":null,"items":[{"k":"p","v":2},{"k":"q","v":1},{"k":"p","v":3}],"s":"a,b,c","n":820982911946154508}`
	for _, src := range []string{
		`[(1,2) + (10,20)]`, `[(1,2) * (10,20)]`, `[.c[] * 2]`, `.a + .a`, `.b + "!"`, `"<" + .b + ">"`, `.c + [4]`, `.d + {z: 1}`,
		`.d * {x: {z: 2}}`, `.b * 3`, `3 * .b`, `.b * 0`, `.b * -1`, `.e + .a`, `.a + .e`, `.n * 2`, `.n + .n`,
		`.a += 1`, `.c[1] += 10`, `.b *= 2`, `.d *= {w: 1}`, `.a -= 1`, `.e //= 7`, `.a //= 7`, `.a = 5`, `.c[] = .a`, `.c |= map(. * 2)`,
		`.c[.a] = 9`, `.items[.a].v`, `.d["x"]`, `setpath(["d", "x", "y"]; 2)`, `setpath(["c", 5]; 1)`, `del(.d)`, `[paths]`,
		`{a, b, total: (.a + 1)}`, `{(.b): .a}`, `"\(.a)-\(.b)"`, `@base64 "x\(.b)"`, `@json "v=\(.c)"`,
		`reduce .c[] as $x (0; . + $x)`, `[foreach .c[] as $x (0; . + $x)]`, `[limit(3; repeat(1))]`, `[range(5)]`, `.c[1:]`,
		`.c | map(. * 10)`, `.items | group_by(.k)`, `.items | sort_by(.v)`, `.items | unique_by(.k)`,
		`.items | min_by(.v)`, `.items | max_by(.v)`, `.items | map(.v) | add`, `add(.c[])`, `.c | combinations(2)`, `[.c, [5, 6]] | [combinations]`,
		`.d | with_entries(.value |= tostring)`, `.d | to_entries`, `walk(if type == "number" then . + 1 else . end)`, `pick(.d.x)`,
		`fromstream(tostream)`, `[tostream] | fromstream(.[])`, `.s | sub(","; ";")`, `.s | gsub(","; ";")`, `.s | gsub("(?<l>[a-z])"; "\(.l)\(.l)")`,
		`.s | [splits(",")]`, `.s | split(",") | join("+")`, `.d | map_values(. + {n: 1})`, `try error("x") catch .`, `.c | first, last`,
		`[.c[] | select(. > 1)]`, `if .a == 1 then "one" else "other" end`, `.items | INDEX(.k)`, `$event.id + "-" + .b`,
		`[.[] | numbers] | length`, `.c | [.[] as $x | $x * $x]`, `label $out | .c[] | if . > 2 then ., break $out else . end`,
		`def inc(f): f + 1; inc(.a)`, `def twice: . * 2; .c | map(twice)`, `. as {a: $x, b: $y} | $x + ($y | length)`,
		`[.c[] as [$x] ?// $x | $x]`, `ltrimstr("a")`, `.b | ascii_downcase | ascii_upcase`, `tojson | fromjson | .a`,
	} {
		q, err := gojq.Parse(src)
		require.NoError(t, err, src)
		plain, err := gojq.Compile(q, gojq.WithVariables([]string{"$event"}))
		require.NoError(t, err, src)
		doc, err := decode([]byte(input))
		require.NoError(t, err)
		var want []any
		iter := plain.Run(doc, map[string]any{"id": "evt_1"})
		for v, ok := iter.Next(); ok; v, ok = iter.Next() {
			if _, isErr := v.(error); isErr {
				want = append(want, "an error")
				break
			}
			want = append(want, v)
		}
		got, err := runOnce(t, src, input)
		if err != nil {
			got = append(got, "an error")
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		require.JSONEq(t, string(wantJSON), string(gotJSON), src)
	}
}

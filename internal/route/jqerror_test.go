package route

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pan is a card number as a provider body might carry it.
const pan = "4242424242424242"

func TestRunTimeErrorsQuoteNoValue(t *testing.T) {
	t.Parallel()
	body := `{"card":"card=` + pan + ` cvc 123","n":` + pan + `,"list":["` + pan + `"],"obj":{"pan":"` + pan + `"}}`
	for _, tt := range []struct{ program, want string }{
		{`.card.x`, "expected an object but got: string"},
		{`.obj[0]`, "expected an array but got: object"},
		{`.card[]`, "cannot iterate over: string"},
		{`.n | ascii_downcase`, "ascii_downcase cannot be applied to: number"},
		{`.card | ltrimstr(1)`, "ltrimstr(…) cannot be applied to its input with these arguments"},
		{`.card | tonumber`, "tonumber cannot be applied to its input"},
		{`.card | fromjson`, "fromjson cannot be applied to its input"},
		{`.card + 1`, "cannot add: string and the other operand"},
		{`.obj - .card`, "cannot subtract: object and the other operand"},
		{`.card / 0`, "cannot divide: string and the other operand"},
		{`.n % 0`, "run-time error (its text is not quoted: it may hold body text)"},
		{`{(.n): 1}`, "expected a string for object key but got: number"},
		{`.list[{}]`, `expected "start" and "end" for slicing but got: object`},
		{`.card | test("(")`, "run-time error (its text is not quoted: it may hold body text)"},
		{`error(.card)`, "error raised with a string (not quoted: it may hold body text)"},
		{`error(.obj)`, "error raised with an object (not quoted: it may hold body text)"},
		{`error("the card is missing")`, "error: the card is missing"},
		{`error(null)`, "error(null) raised"},
		{`.card | halt_error`, "halt_error raised with a string"},
		{`"%" + .card | @base64d`, "@base64d cannot be applied to its input"},
		{`[.list[] | implode]`, "implode cannot be applied to: string"},
		{`.card | splits(1)`, "match(…) cannot be applied to its input with these arguments"},
		{`.card | -.`, "cannot negate: string"},
		{`getpath(["card", "x"])`, "getpath(…) cannot be applied to its input with these arguments"},
		{`.card | @csv`, "@csv cannot be applied to: string"},
		{`[.obj] | @csv`, "@csv cannot format an array including: object"},
	} {
		t.Run(tt.program, func(t *testing.T) {
			t.Parallel()
			p, err := compile("routes[0].filter", tt.program, false)
			require.NoError(t, err)
			doc, err := decode([]byte(body))
			require.NoError(t, err)
			err = p.run(context.Background(), doc, len(body), nil, nil, func(any) bool { return true })
			require.Error(t, err)
			require.Equal(t, "routes[0].filter: "+tt.want, err.Error())
			for _, digits := range []string{pan, pan[:8], pan[8:], "4242"} {
				require.NotContains(t, err.Error(), digits)
			}
			require.False(t, strings.Contains(err.Error(), "cvc"))
		})
	}
}

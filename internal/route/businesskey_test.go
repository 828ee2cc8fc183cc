package route

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/config"
)

func TestBusinessKey(t *testing.T) {
	t.Parallel()

	body := []byte(`{"type": "invoice.paid", "data": {"object": {"id": "in_1", "big": 12345678901234567891,
		"paid": true, "none": null, "empty": "", "lines": [1], "meta": {}}}}`)
	header := http.Header{"X-Order-Id": {"ord_7"}}
	tests := []struct {
		name    string
		sources []string
		body    []byte
		want    string
		missing string
	}{
		{name: "NoKey"},
		{name: "TypeAndObject", sources: []string{"type", "json:data.object.id"}, want: `["invoice.paid","in_1"]`},
		{name: "OrderMatters", sources: []string{"json:data.object.id", "type"}, want: `["in_1","invoice.paid"]`},
		{name: "NumberKeepsItsDigits", sources: []string{"json:data.object.big"}, want: `["12345678901234567891"]`},
		{name: "Boolean", sources: []string{"json:data.object.paid"}, want: `["true"]`},
		{name: "HeaderAnyCase", sources: []string{"header:x-order-id"}, want: `["ord_7"]`},
		{name: "ValuesWithQuotesStayDistinct", sources: []string{"header:X-Order-Id", "type"}, want: `["ord_7","invoice.paid"]`},
		{name: "AbsentField", sources: []string{"type", "json:data.object.customer"},
			missing: "business key: json:data.object.customer is missing from the body"},
		{name: "PathThroughAValue", sources: []string{"json:data.object.id.x"},
			missing: "business key: json:data.object.id.x is missing from the body"},
		{name: "Null", sources: []string{"json:data.object.none"}, missing: "business key: json:data.object.none is null in the body"},
		{name: "Empty", sources: []string{"json:data.object.empty"}, missing: "business key: json:data.object.empty is empty in the body"},
		{name: "Array", sources: []string{"json:data.object.lines"},
			missing: "business key: json:data.object.lines is not a string, number or boolean in the body"},
		{name: "Object", sources: []string{"json:data.object.meta"},
			missing: "business key: json:data.object.meta is not a string, number or boolean in the body"},
		{name: "AbsentHeader", sources: []string{"header:X-Shop"}, missing: "business key: header:X-Shop is missing from the request"},
		{name: "NotJSON", sources: []string{"json:id"}, body: []byte("id=1"),
			missing: "business key: json:id cannot be read: the body is not a JSON object"},
		{name: "TrailingData", sources: []string{"json:id"}, body: []byte(`{"id": "a"} {"id": "b"}`),
			missing: "business key: json:id cannot be read: the body is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := NewInput(Event{Provider: "stripe", ID: "evt_1", Type: "invoice.paid"}, header, body, nil)
			if tt.body != nil {
				in.Body = tt.body
			}
			got, err := (&Route{Route: config.Route{BusinessKey: tt.sources}}).BusinessKey(in)
			if tt.missing != "" {
				require.EqualError(t, err, tt.missing)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

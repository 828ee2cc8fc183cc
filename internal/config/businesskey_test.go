package config

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateBusinessKey(t *testing.T) {
	t.Parallel()

	const sourceList = "must be type, json:dotted.path or header:NAME"
	tests := []struct {
		name string
		yaml string // the route's business_key line; empty leaves it out
		want []string
	}{
		{name: "Absent"},
		{name: "TypeAndObject", yaml: `business_key: [type, "json:data.object.id"]`},
		{name: "ObjectAndVersion", yaml: `business_key: ["json:data.object.id", "json:data.object.version"]`},
		{name: "Header", yaml: `business_key: ["header:X-Order-Id"]`},
		{name: "EmptyList", yaml: `business_key: []`,
			want: []string{"routes[0].business_key: must list at least one source (type, json:dotted.path or header:NAME), or be left out"}},
		{name: "OnlyType", yaml: `business_key: [type]`,
			want: []string{"routes[0].business_key: lists only type: every event of a type would share one key and only the first would ever be delivered; add the object it is about, e.g. json:data.object.id"}},
		{name: "UnknownSource", yaml: `business_key: [type, id]`,
			want: []string{`routes[0].business_key[1]: "id" ` + sourceList}},
		{name: "EmptyPathSegment", yaml: `business_key: ["json:data..id"]`,
			want: []string{`routes[0].business_key[0]: "json:data..id" ` + sourceList + " (a path of object keys separated by single dots)"}},
		{name: "EmptyPath", yaml: `business_key: ["json:"]`,
			want: []string{`routes[0].business_key[0]: "json:" ` + sourceList + " (a path of object keys separated by single dots)"}},
		{name: "BadHeaderName", yaml: `business_key: ["header:X Order"]`,
			want: []string{`routes[0].business_key[0]: "header:X Order" ` + sourceList + " (a header name of letters, digits and -)"}},
		{name: "Twice", yaml: `business_key: ["json:data.id", "json:data.id"]`,
			want: []string{`routes[0].business_key[1]: "json:data.id" is listed twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`
providers:
  - name: stripe
    scheme: stripe
    secrets_env: [STRIPE_WEBHOOK_SECRET]
routes:
  - name: ship-order
    provider: stripe
    events: ["*"]
    url: http://shipments.internal/hooks
    ` + tt.yaml + "\n"))
			require.Equal(t, tt.want, problems(err))
		})
	}
}

func TestBusinessKeyOf(t *testing.T) {
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
			in := &KeyInput{Type: "invoice.paid", Header: header, Body: body}
			if tt.body != nil {
				in.Body = tt.body
			}
			got, err := Route{BusinessKey: tt.sources}.BusinessKeyOf(in)
			if tt.missing != "" {
				require.EqualError(t, err, tt.missing)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}

	t.Run("BodyIsParsedOnceForEveryRoute", func(t *testing.T) {
		t.Parallel()
		in := &KeyInput{Type: "t", Body: []byte(`{"a": "1"}`)}
		r := Route{BusinessKey: []string{"json:a"}}
		k1, err := r.BusinessKeyOf(in)
		require.NoError(t, err)
		in.Body = nil // a second parse would find nothing
		k2, err := r.BusinessKeyOf(in)
		require.NoError(t, err)
		require.Equal(t, k1, k2)
	})
}

package config

import (
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

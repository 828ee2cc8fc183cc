package verify

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseObject(t *testing.T) {
	t.Parallel()

	tests := []struct {
		body string
		ok   bool
	}{
		{`{}`, true},
		{" \n{\"a\" : 1}\n\t", true},
		{`{"a":"caf\u00e9"}`, true},
		{``, false},
		{`null`, false},
		{`[]`, false},
		{`"id"`, false},
		{`{"a":1`, false},
		{`{"a":1}}`, false},
		{`{"a":1} {"b":2}`, false},
		{`{"a":1} x`, false},
	}
	for _, tc := range tests {
		obj, err := parseObject([]byte(tc.body))
		if tc.ok {
			require.NoError(t, err, tc.body)
			require.NotNil(t, obj)
			continue
		}
		requireVerifyError(t, err, ErrInvalid, "unparsable_body")
	}
}

func TestFromJSON(t *testing.T) {
	t.Parallel()

	obj, err := parseObject([]byte(`{"a":{"b":{"c":"deep"},"n":1.5e3,"t":true,"z":null,"e":"","arr":[1]},"x":"top"}`))
	require.NoError(t, err)

	tests := []struct {
		path string
		want value
	}{
		{"x", value{text: "top", present: true, scalar: true}},
		{"a.b.c", value{text: "deep", present: true, scalar: true}},
		{"a.n", value{text: "1.5e3", present: true, scalar: true}},
		{"a.t", value{present: true}},
		{"a.arr", value{present: true}},
		{"a.b", value{present: true}},
		{"a.z", value{}},
		{"a.e", value{scalar: true}},
		{"a.missing", value{}},
		{"x.y", value{}},
		{"a.arr.0", value{}},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, fromJSON(obj, tc.path), tc.path)
	}
}

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

func TestFromJSONArrayIndex(t *testing.T) {
	t.Parallel()
	obj, err := parseObject([]byte(`{"items":[{"id":"a"},{"id":"b"}],"n":{"0":"key"}}`))
	require.NoError(t, err)
	require.Equal(t, "a", fromJSONPath(obj, "items.0.id", true).text)
	require.Equal(t, "b", fromJSONPath(obj, "items.1.id", true).text)
	require.False(t, fromJSONPath(obj, "items.2.id", true).present)
	require.False(t, fromJSONPath(obj, "items.01.id", true).present)
	require.False(t, fromJSON(obj, "items.0.id").present, "ids and types never index arrays")
	require.Equal(t, "key", fromJSONPath(obj, "n.0", true).text, "on an object a digit segment is a key")

	require.NoError(t, checkUnambiguous([]byte(`{"items":[{"id":"a"},{"id":"b"}]}`), "items.0.id"))
	require.Error(t, checkUnambiguous([]byte(`{"items":[{"id":"a","ID":"b"}]}`), "items.0.id"))
}

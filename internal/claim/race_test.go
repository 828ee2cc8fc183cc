//go:build race

package claim

// buildFlags are the flags this test binary was built with that change how
// packages compile, so that a program a test builds reuses its packages.
var buildFlags = []string{"-race"}

package n8ncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/internal/devlocal"
)

// checkNode reports a Node.js or npm too old or missing for n8nVersion.
func checkNode(ctx context.Context, con *devlocal.Console) error {
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return fmt.Errorf("n8n needs Node.js %s or newer, and `node --version` failed: %w", n8nMinNode, err)
	}
	v := strings.TrimSpace(string(out))
	if !versionAtLeast(strings.TrimPrefix(v, "v"), n8nMinNode) {
		return fmt.Errorf("n8n %s needs Node.js %s or newer; this is %s", n8nVersion, n8nMinNode, v)
	}
	npm, err := exec.CommandContext(ctx, "npm", "--version").Output()
	if err != nil {
		return fmt.Errorf("installing n8n needs npm, and `npm --version` failed: %w", err)
	}
	con.Printf("n8n-check", "Node.js %s, npm %s", v, strings.TrimSpace(string(npm)))
	return nil
}

// versionAtLeast compares dotted numeric versions.
func versionAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		if i >= len(a) {
			return false
		}
		x, _ := strconv.Atoi(a[i])
		y, _ := strconv.Atoi(b[i])
		if x != y {
			return x > y
		}
	}
	return true
}

// n8nPackageJSON is the package.json the check installs n8n with.
func n8nPackageJSON() []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"name":         "hookgate-n8n-check",
		"private":      true,
		"dependencies": map[string]string{"n8n": n8nVersion},
		"overrides":    map[string]string{"xlsx": n8nXLSXVersion},
	}, "", "  ")
	return append(b, '\n')
}

// installedVersion is the version of the npm package name under dir's
// node_modules, or "" when it is not there.
func installedVersion(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

// installN8n installs n8nVersion into dir unless it is there already.
func installN8n(ctx context.Context, con *devlocal.Console, dir string) error {
	if v := installedVersion(dir, "n8n"); v == n8nVersion && installedVersion(dir, "xlsx") == n8nXLSXVersion {
		con.Printf("n8n-check", "n8n %s is installed in %s", v, dir)
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), n8nPackageJSON(), 0o644); err != nil {
		return err
	}
	con.Printf("n8n-check", "installing n8n %s from the npm registry into %s: about 1.8 GB and several minutes", n8nVersion, dir)
	con.Printf("n8n-check", "  npm install --ignore-scripts (native builds such as sqlite3 are skipped, so n8n uses Postgres)")
	con.Printf("n8n-check", "  package.json overrides xlsx with %s from the registry (n8n's own comes from another host)", n8nXLSXVersion)
	cmd := exec.CommandContext(ctx, "npm", "install", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out := con.Writer("npm")
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	out.Flush()
	if err != nil {
		return fmt.Errorf("npm install of n8n %s in %s: %w", n8nVersion, dir, err)
	}
	if v := installedVersion(dir, "n8n"); v != n8nVersion {
		return fmt.Errorf("npm install finished, but %s holds n8n %q, not %s", dir, v, n8nVersion)
	}
	con.Printf("n8n-check", "installed n8n %s", n8nVersion)
	return nil
}

package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const consoleDoc = route + `console:
  users:
    - name: alice
      role: operator
      password_env: T_ALICE
    - name: bob
      role: viewer
      password_env: T_BOB
  tokens:
    - name: ci-bot
      role: viewer
      token_env: T_CI
`

func TestConsoleParse(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(consoleDoc))
	require.NoError(t, err)
	require.True(t, c.Console.Enabled())
	require.Equal(t, DefaultSessionTTL, c.Console.SessionTTL.D())
	require.Equal(t, []ConsoleUser{{Name: "alice", Role: RoleOperator, PasswordEnv: "T_ALICE"}, {Name: "bob", Role: RoleViewer, PasswordEnv: "T_BOB"}}, c.Console.Users)
	require.Equal(t, []ConsoleToken{{Name: "ci-bot", Role: RoleViewer, TokenEnv: "T_CI"}}, c.Console.Tokens)

	c, err = Parse([]byte(consoleDoc + "  session_ttl: 30m\n"))
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, c.Console.SessionTTL.D())

	c, err = Parse([]byte(route))
	require.NoError(t, err)
	require.False(t, c.Console.Enabled(), "no users and no tokens: the console is off")
}

func TestConsoleReadPool(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(consoleDoc))
	require.NoError(t, err)
	require.Equal(t, ReadPool{MaxConns: 4, StatementTimeout: Duration(5 * time.Second), WaitTimeout: Duration(2 * time.Second)},
		c.Console.ReadPool)

	c, err = Parse([]byte(consoleDoc + "  read_pool: {max_conns: 2, statement_timeout: 30s, wait_timeout: 500ms}\n"))
	require.NoError(t, err)
	require.Equal(t, ReadPool{MaxConns: 2, StatementTimeout: Duration(30 * time.Second), WaitTimeout: Duration(500 * time.Millisecond)},
		c.Console.ReadPool)

	for _, tt := range []struct{ pool, want string }{
		{"{max_conns: -1}", "console.read_pool.max_conns: must be from 1 to 50, got -1"},
		{"{max_conns: 51}", "console.read_pool.max_conns: must be from 1 to 50, got 51"},
		{"{statement_timeout: 10ms}", "console.read_pool.statement_timeout: must be from 100ms to 10m0s, got 10ms"},
		{"{statement_timeout: 1h}", "console.read_pool.statement_timeout: must be from 100ms to 10m0s, got 1h0m0s"},
		{"{wait_timeout: -1s}", "console.read_pool.wait_timeout: must be a positive duration of at most 1m0s, got -1s"},
		{"{wait_timeout: 2m}", "console.read_pool.wait_timeout: must be a positive duration of at most 1m0s, got 2m0s"},
		{"{max_con: 2}", `unknown key "max_con"`},
	} {
		_, err := Parse([]byte(consoleDoc + "  read_pool: " + tt.pool + "\n"))
		require.ErrorContains(t, err, tt.want, tt.pool)
	}
}

func TestConsoleInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, doc, want string }{
		{"Role", strings.Replace(consoleDoc, "role: operator", "role: admin", 1), `console.users[0].role: "admin" must be viewer or operator`},
		{"NoRole", strings.Replace(consoleDoc, "      role: viewer\n      token_env", "      token_env", 1), `console.tokens[0].role: "" must be viewer or operator`},
		{"Name", strings.Replace(consoleDoc, "name: alice", "name: Alice Smith", 1), `console.users[0].name: "Alice Smith" must be lower-case`},
		{"Duplicate", strings.Replace(consoleDoc, "name: ci-bot", "name: alice", 1), `console.tokens[0].name: "alice" is already used by console.users[0]`},
		{"Env", strings.Replace(consoleDoc, "password_env: T_BOB", "password_env: T-BOB", 1), `console.users[1].password_env: "T-BOB" is not an environment variable name`},
		{"NoEnv", strings.Replace(consoleDoc, "      token_env: T_CI\n", "", 1), `console.tokens[0].token_env: is required (or token_file)`},
		{"EnvAndFile", strings.Replace(consoleDoc, "      token_env: T_CI\n", "      token_env: T_CI\n      token_file: /run/ci-token\n", 1), `console.tokens[0].token_file: is set beside token_env`},
		{"BadFile", strings.Replace(consoleDoc, "      password_env: T_BOB\n", "      password_file: \"\\0\"\n", 1), `console.users[1].password_file: "\x00" is not a file path`},
		{"TTL", consoleDoc + "  session_ttl: -1h\n", `console.session_ttl: must be a positive duration`},
		{"Unknown", consoleDoc + "  sesion_ttl: 1h\n", `unknown key "sesion_ttl" (in console)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.doc))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestResolveConsoleSecrets(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(consoleDoc))
	require.NoError(t, err)
	env := map[string]string{"T_ALICE": "alice-password-1", "T_BOB": "short", "T_CI": ""}
	_, err = c.ResolveConsoleSecrets(func(k string) string { return env[k] })
	require.EqualError(t, err, "console.users[1].password_env: environment variable T_BOB holds fewer than 12 characters\n"+
		"console.tokens[0].token_env: environment variable T_CI is not set or empty")
	require.NotContains(t, err.Error(), "short", "a value is never echoed")

	env["T_BOB"], env["T_CI"] = "bob-password-12", "ci-token-0123456789"
	s, err := c.ResolveConsoleSecrets(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"alice": "alice-password-1", "bob": "bob-password-12"}, s.Passwords)
	require.Equal(t, map[string]string{"ci-bot": "ci-token-0123456789"}, s.Tokens)
}

func TestRetentionAudit(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(route))
	require.NoError(t, err)
	require.Equal(t, 365*24*time.Hour, c.Retention.AuditAge())
	c, err = Parse([]byte("retention:\n  audit: 720h\n" + route))
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, c.Retention.AuditAge())
	_, err = Parse([]byte("retention:\n  audit: -1h\n" + route))
	require.ErrorContains(t, err, "retention.audit: must be a positive duration")
}

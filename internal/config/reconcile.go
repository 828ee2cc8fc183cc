package config

import (
	"cmp"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Reconcile defaults and bounds.
const (
	// DefaultReconcileEvery is reconcile.every when unset.
	DefaultReconcileEvery = 5 * time.Minute
	// DefaultReconcileLookback is reconcile.lookback when unset: Stripe
	// retries for three days, GitHub keeps deliveries for three.
	DefaultReconcileLookback = 72 * time.Hour
	// MaxReconcileLookback is as far back as Stripe keeps events.
	MaxReconcileLookback = 30 * 24 * time.Hour
	// ReconcileHookApp is reconcile.hook for a GitHub App's own webhook.
	ReconcileHookApp = "app"
)

// Reconcile fetches, from a provider's API, the events the provider never
// delivered, and passes them through the same claim as a webhook (stripe)
// or asks the provider to deliver them again (github). Optional; only for
// the stripe and github schemes.
type Reconcile struct {
	// APIKeyEnv names the variable holding a Stripe key (a restricted key
	// with read access to events), or APIKeyFile a file holding it (stripe).
	APIKeyEnv  string `yaml:"api_key_env"`
	APIKeyFile string `yaml:"api_key_file"`
	// TokenEnv names the variable holding a GitHub token that may read and
	// redeliver the hook's deliveries, or TokenFile a file holding it
	// (github, with a repos/ or orgs/ hook).
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// Hook is the GitHub hook whose deliveries are listed:
	// repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID, or app (the webhook of
	// the GitHub App AppID, authenticated with PrivateKeyFile) (github).
	Hook string `yaml:"hook"`
	// AppID and PrivateKeyFile authenticate as the GitHub App (hook: app).
	AppID          int64  `yaml:"app_id"`
	PrivateKeyFile string `yaml:"private_key_file"`
	// Every is how often a run starts. Default 5m; at least 1s.
	Every Duration `yaml:"every"`
	// Lookback is how far back the first run (and a run after a long
	// stop) looks. Default 72h; at most 720h (Stripe keeps 30 days).
	Lookback Duration `yaml:"lookback"`
	// APIBase is the provider's API root. Default https://api.stripe.com
	// or https://api.github.com; tests point it elsewhere.
	APIBase string `yaml:"api_base"`
}

// Default API roots.
const (
	StripeAPIBase = "https://api.stripe.com"
	GitHubAPIBase = "https://api.github.com"
)

func (r *Reconcile) setDefaults(scheme string) {
	r.Every = cmp.Or(r.Every, Duration(DefaultReconcileEvery))
	r.Lookback = cmp.Or(r.Lookback, Duration(DefaultReconcileLookback))
	switch scheme {
	case SchemeStripe:
		r.APIBase = cmp.Or(r.APIBase, StripeAPIBase)
	case SchemeGitHub:
		r.APIBase = cmp.Or(r.APIBase, GitHubAPIBase)
	}
}

// hookRE is a repository or organization hook's path.
var hookRE = regexp.MustCompile(`^(repos/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|orgs/[A-Za-z0-9_.-]+)/hooks/([1-9][0-9]{0,18})$`)

// ParseHook splits a repos/ or orgs/ hook path into its owner, its
// repository ("" for an organization's hook) and its id.
func ParseHook(hook string) (owner, repo string, id int64, ok bool) {
	m := hookRE.FindStringSubmatch(hook)
	if m == nil {
		return "", "", 0, false
	}
	id, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	parts := strings.Split(m[1], "/")
	if parts[0] == "repos" {
		return parts[1], parts[2], id, true
	}
	return parts[1], "", id, true
}

// reconcile checks provider p's reconcile section at key.
func (v *validator) reconcile(key string, p Provider) {
	r := p.Reconcile
	if r == nil {
		return
	}
	key += ".reconcile"
	secret := func(envKey, env, fileKey, file string) {
		switch {
		case env == "" && file == "":
			v.add(key+"."+envKey, "is required (or %s)", fileKey)
		case env != "" && file != "":
			v.add(key+"."+fileKey, "is set beside %s: name the secret once", envKey)
		case env != "" && !envRE.MatchString(env):
			v.add(key+"."+envKey, "%q is not an environment variable name", env)
		case file != "":
			v.filePath(key+"."+fileKey, file)
		}
	}
	refuse := func(scheme string, keys map[string]bool) {
		for _, k := range []string{"api_key_env", "api_key_file", "token_env", "token_file", "hook", "app_id", "private_key_file"} {
			if keys[k] {
				v.add(key+"."+k, "does not apply to scheme %s", scheme)
			}
		}
	}
	switch p.Scheme {
	case SchemeStripe:
		secret("api_key_env", r.APIKeyEnv, "api_key_file", r.APIKeyFile)
		refuse(p.Scheme, map[string]bool{"token_env": r.TokenEnv != "", "token_file": r.TokenFile != "",
			"hook": r.Hook != "", "app_id": r.AppID != 0, "private_key_file": r.PrivateKeyFile != ""})
		if strings.HasPrefix(p.ScopeFrom, "header:") {
			v.add(key, "cannot be used with scope_from %q: a fetched event has no headers to read the scope from", p.ScopeFrom)
		}
	case SchemeGitHub:
		refuse(p.Scheme, map[string]bool{"api_key_env": r.APIKeyEnv != "", "api_key_file": r.APIKeyFile != ""})
		if p.ScopeFrom != "" {
			v.add(key, "cannot be used with scope_from: a delivery id is claimed scoped, and GitHub lists it without the scope")
		}
		v.githubHook(key, r, secret)
	default:
		v.add(key, "applies only to scheme stripe or github, not %s", p.Scheme)
		return
	}
	if r.Every < Duration(time.Second) {
		v.add(key+".every", "must be at least 1s, got %s", r.Every.D())
	}
	switch {
	case r.Lookback <= 0:
		v.add(key+".lookback", "must be a positive duration, got %s", r.Lookback.D())
	case r.Lookback.D() > MaxReconcileLookback:
		v.add(key+".lookback", "%s is longer than 720h: the provider keeps events 30 days at most", r.Lookback.D())
	}
	if u, err := url.Parse(r.APIBase); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		v.add(key+".api_base", "must be an absolute http or https URL without a query")
	}
}

// githubHook checks a github reconcile section's hook and credentials.
func (v *validator) githubHook(key string, r *Reconcile, secret func(envKey, env, fileKey, file string)) {
	switch {
	case r.Hook == "":
		v.add(key+".hook", "is required for scheme github: repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app")
	case r.Hook == ReconcileHookApp:
		if r.AppID <= 0 {
			v.add(key+".app_id", "is required with hook app (the GitHub App's id)")
		}
		if r.PrivateKeyFile == "" {
			v.add(key+".private_key_file", "is required with hook app (the GitHub App's private key, PEM)")
		} else {
			v.filePath(key+".private_key_file", r.PrivateKeyFile)
		}
		if r.TokenEnv != "" {
			v.add(key+".token_env", "does not apply with hook app, which authenticates as the App")
		}
		if r.TokenFile != "" {
			v.add(key+".token_file", "does not apply with hook app, which authenticates as the App")
		}
	default:
		if _, _, _, ok := ParseHook(r.Hook); !ok {
			v.add(key+".hook", "%q must be repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app", r.Hook)
		}
		secret("token_env", r.TokenEnv, "token_file", r.TokenFile)
		if r.AppID != 0 {
			v.add(key+".app_id", "applies only with hook app")
		}
		if r.PrivateKeyFile != "" {
			v.add(key+".private_key_file", "applies only with hook app")
		}
	}
}

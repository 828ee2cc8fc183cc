package deliver

import (
	"cmp"
	"fmt"
	"net/http"

	"github.com/hookgate/hookgate/internal/route"
	"github.com/hookgate/hookgate/internal/secretfile"
)

// routeRuntime is what the worker holds for one configured route, built
// once at start beside the compiled route (its matcher, programs, headers,
// attempts and dependents; see route.Table): the call tokens that bound its
// concurrency, the HTTP client of its calls and the signer of its requests.
type routeRuntime struct {
	*route.Route

	// calls holds one token per call in flight to the route: its
	// concurrency, exact in this process. River's slots for the route's
	// queue are callSlots times as many (see Queues), so that the fetch,
	// the batched load and the batched end of one job overlap another's
	// call instead of holding a call's place.
	calls chan struct{}
	// client makes the route's calls: Options.HTTPClient, or one of the
	// route's own (see routeClient).
	client *http.Client
	// signer signs the route's requests; nil sends them unsigned.
	signer *signer
}

// newRuntimes builds the runtime of every route of w.routes, in file
// order (the i of routes[i] in the errors). It fails, naming the key, when
// a route's TLS files cannot be read or its signing secret is not a
// Standard Webhooks secret (never quoting the value).
func (w *Worker) newRuntimes(o Options) (map[string]*routeRuntime, error) {
	runtimes := make(map[string]*routeRuntime, len(w.routes.Routes()))
	for i, r := range w.routes.Routes() {
		concurrency := cmp.Or(r.Concurrency, o.Config.Worker.Concurrency)
		rt := &routeRuntime{Route: r, calls: make(chan struct{}, concurrency), client: o.HTTPClient}
		var err error
		if rt.client == nil {
			if rt.client, err = routeClient(i, r.Route, concurrency); err != nil {
				return nil, err
			}
		}
		if rt.signer, err = w.routeSigner(o, i, r); err != nil {
			return nil, err
		}
		runtimes[r.Name] = rt
	}
	return runtimes, nil
}

// routeSigner returns the signer of routes[i], nil when it has no signing
// secret: from its signing_secret_file, re-read as it rotates, or from its
// signing_secret_env (o.SigningSecrets), both held to checkSigningSecret
// (see secretfile.Resolver).
func (w *Worker) routeSigner(o Options, i int, r *route.Route) (*signer, error) {
	res := secretfile.Resolver{Logger: w.logger, Redact: w.redact.Add}
	var key string
	var source *secretfile.Secret
	var err error
	switch secret, ok := o.SigningSecrets[r.Name]; {
	case r.SigningSecretFile != "":
		key = fmt.Sprintf("routes[%d].signing_secret_file", i)
		source, err = res.File(r.SigningSecretFile, key, checkSigningSecret)
		key += ": file " + r.SigningSecretFile
	case ok:
		key = fmt.Sprintf("routes[%d].signing_secret_env", i)
		source, err = res.Env(key, r.SigningSecretEnv, secret, checkSigningSecret)
		key += ": " + r.SigningSecretEnv
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return newSigner(key, source)
}

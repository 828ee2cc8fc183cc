package console

import (
	"context"
	"net"
	"net/http"

	"github.com/hookgate/hookgate/internal/claim"
)

type sourceKey struct{}

// withSource returns ctx carrying the address r came from, for the audit
// rows of sign-ins. It is the connection's peer: a proxy in front of the
// worker is named, never a header a client could write.
func withSource(ctx context.Context, r *http.Request) context.Context {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = ""
	}
	return context.WithValue(ctx, sourceKey{}, host)
}

// sourceOf is the address withSource put in ctx; "" when none.
func sourceOf(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

// fromConsole marks r's actions as the console's, from its address.
func fromConsole(r *http.Request) *http.Request {
	return r.WithContext(withSource(claim.WithOrigin(r.Context(), claim.OriginConsole), r))
}

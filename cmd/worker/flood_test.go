package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookgate/hookgate/internal/dbtest"
	"github.com/hookgate/hookgate/internal/lockout"
)

// fromAddr returns a client whose connections leave from ip, one
// connection a request: Linux lets a client bind any address of
// 127.0.0.0/8, so each ip is a client address of its own to the worker.
func fromAddr(ip net.IP) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// floodAddr is the i-th flooding address, from 127.1.0.1 on, skipping
// the .0 and .255 of each /24.
func floodAddr(i int) net.IP {
	return net.IPv4(127, byte(1+i/(254*256)), byte(i/254%256), byte(1+i%254))
}

// authCase is one way to present a credential to the worker's listener.
type authCase struct {
	name string
	req  func(base, secret string) *http.Request
}

var authCases = []authCase{
	{"api basic", func(base, secret string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, base+"/api/v1/claims", nil)
		r.SetBasicAuth("alice", secret)
		return r
	}},
	{"api bearer", func(base, secret string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, base+"/api/v1/claims", nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		return r
	}},
	{"console sign-in", func(base, secret string) *http.Request {
		form := url.Values{"name": {"alice"}, "password": {secret}}
		r, _ := http.NewRequest(http.MethodPost, base+"/console/sign-in", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}},
	{"river ui", func(base, secret string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, base+"/riverui/", nil)
		r.SetBasicAuth(uiUser, secret)
		return r
	}},
}

// TestFloodNeverLocksOutARightCredential: wrong credentials from more
// client addresses than the guard holds (each address one failure, by the
// API's Basic and Bearer, the console's sign-in form and the River UI in
// turn), through real HTTP from real source addresses, leave the right
// password, token and UI password from an address that did not fail
// answered 200 (the sign-in form 303, to the console). Before, past the
// guard's table every untracked address shared one count, which the flood
// pushed past its limit: every right credential then answered 429. The UI's
// failures are audited and logged as the console's are.
func TestFloodNeverLocksOutARightCredential(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDB(t)
	env := workerEnv(db, writeConsoleConfig(t, "http://127.0.0.1:1"))
	env["HOOKGATE_UI_PASSWORD"] = uiTestPassword
	w := serveWorker(t, env)
	base := "http://" + w.addr

	n := lockout.DefaultClients + 4*lockout.DefaultAddressFailures
	var next atomic.Int64
	statuses := make([]map[int]int, len(authCases))
	var mu sync.Mutex
	for i := range statuses {
		statuses[i] = map[int]int{}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c := i % len(authCases)
				resp, err := fromAddr(floodAddr(i)).Do(authCases[c].req(base, fmt.Sprintf("wrong-secret-%08d", i)))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				mu.Lock()
				statuses[c][resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	fresh := fromAddr(net.IPv4(127, 254, 0, 1))
	for _, tt := range []struct {
		c      authCase
		secret string
		want   int
	}{
		{authCases[0], alicePassword, http.StatusOK},
		{authCases[1], "ci-token-abcdefghijkl", http.StatusOK},
		{authCases[2], alicePassword, http.StatusSeeOther},
		{authCases[3], uiTestPassword, http.StatusOK},
	} {
		resp, err := fresh.Do(tt.c.req(base, tt.secret))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tt.want, resp.StatusCode, "%s: the right credential from an address that did not fail", tt.c.name)
	}

	for i, c := range authCases {
		require.Equal(t, map[int]int{http.StatusUnauthorized: n / len(authCases)}, statuses[i], "%s: every wrong credential checked", c.name)
	}
	var uiRows int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log
WHERE action = 'failed_sign_in' AND actor = 'admin' AND detail->>'via' = 'river ui' AND detail->>'source' LIKE '127.%'`).Scan(&uiRows))
	require.Equal(t, n/len(authCases), uiRows, "each failed UI sign-in audited, as the console's are")
	require.Contains(t, w.logs.String(), `"action":"failed_sign_in"`)
	require.Contains(t, w.logs.String(), `river ui`)
}

package harness

import (
	"fmt"
	"net/http"
	"time"
)

// JoinTokens polls an agent's API until it shows both join tokens of its
// cluster CA (GET /v1/operator/join-token/{server,client}), or timeout
// passes. alive, when not nil, ends the wait early once the agent's
// process is gone.
func (a *API) JoinTokens(timeout time.Duration, alive func() bool) (server, client string, err error) {
	exited := false
	last, ok := Poll(timeout, 100*time.Millisecond, func() (bool, string) {
		var s, c struct{ Token string }
		st1, err1 := a.Do(http.MethodGet, "/v1/operator/join-token/server", nil, &s)
		st2, err2 := a.Do(http.MethodGet, "/v1/operator/join-token/client", nil, &c)
		if err1 == nil && err2 == nil && st1 == http.StatusOK && st2 == http.StatusOK && s.Token != "" && c.Token != "" {
			server, client = s.Token, c.Token
			return true, ""
		}
		if alive != nil && !alive() {
			exited = true
			return true, "the agent exited"
		}
		return false, fmt.Sprintf("status %d/%d, %v/%v", st1, st2, err1, err2)
	})
	switch {
	case exited:
		return "", "", fmt.Errorf("the agent exited before showing its join tokens")
	case !ok:
		return "", "", fmt.Errorf("join tokens not shown after %s: %s", timeout, last)
	}
	return server, client, nil
}

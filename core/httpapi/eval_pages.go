package httpapi

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// evalPage is ?per_page= and ?next_token= of GET /v1/evaluations, as
// Nomad's: evals in creation order, a page of perPage (0: all) starting at
// the token "<CreateIndex>.<ID>" of its first eval; X-Nomad-NextToken
// names the next page's first eval.
type evalPage struct {
	perPage   int
	hasToken  bool
	fromIndex uint64
	fromID    string
}

func parseEvalPage(r *http.Request) (evalPage, error) {
	var p evalPage
	q := r.URL.Query()
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, badRequest("per_page: %q is not a non-negative integer", v)
		}
		p.perPage = n
	}
	if tok := q.Get("next_token"); tok != "" {
		if len(tok) > 2*structs.MaxIdentifierBytes {
			return p, badRequest("next_token: longer than %d bytes", 2*structs.MaxIdentifierBytes)
		}
		idx, id, ok := strings.Cut(tok, ".")
		n, err := strconv.ParseUint(idx, 10, 64)
		if !ok || err != nil {
			return p, badRequest("next_token: %q is not a token this list answered (<CreateIndex>.<ID>)", tok)
		}
		p.hasToken, p.fromIndex, p.fromID = true, n, id
	}
	return p, nil
}

func evalToken(e *structs.Evaluation) string {
	return strconv.FormatUint(e.CreateIndex, 10) + "." + e.ID
}

// apply returns the page of evals (sorted by creation) and sets or clears
// the next-token header.
func (p evalPage) apply(w http.ResponseWriter, evals []*structs.Evaluation) []*structs.Evaluation {
	w.Header().Del(headerNextToken)
	if p.hasToken {
		start := sort.Search(len(evals), func(i int) bool {
			e := evals[i]
			return e.CreateIndex > p.fromIndex || e.CreateIndex == p.fromIndex && e.ID >= p.fromID
		})
		evals = evals[start:]
	}
	if p.perPage > 0 && len(evals) > p.perPage {
		w.Header().Set(headerNextToken, evalToken(evals[p.perPage]))
		evals = evals[:p.perPage]
	}
	return evals
}

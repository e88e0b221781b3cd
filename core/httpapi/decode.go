package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// limitBody caps every request body at max bytes. What a write accepts ends
// up in the Raft log, so the cap is applied before anything is read.
func limitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBody reads a JSON request body. Unknown fields are accepted and
// ignored: Nomad's client sends many fields drover does not implement.
func decodeBody(r *http.Request, out any) error {
	return decode(r, out, false)
}

// decodeOptionalBody is decodeBody for requests whose body may be empty.
func decodeOptionalBody(r *http.Request, out any) error {
	return decode(r, out, true)
}

func decode(r *http.Request, out any, optional bool) error {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return structs.NewError(structs.ErrTooLarge,
					"Request body too large: exceeds limit http_max_body_bytes (%d bytes)", tooBig.Limit)
			}
			return badRequest("Failed to read request body: %v", err)
		}
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := decodeJSONInput(body, out); err != nil {
		return badRequest("Failed to decode request body: %v", err)
	}
	return nil
}

// decodeJSONInput decodes one JSON value into out after checking it against the
// input limits, then refuses null elements of typed arrays and maps. Every
// error names the field.
func decodeJSONInput(body []byte, out any) error {
	if err := checkJSONLimits(body); err != nil {
		return err
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(out); err != nil {
		return errors.New(describeDecodeError(err))
	}
	return structs.CheckNoNilElements(out)
}

// describeDecodeError names the offending field of a JSON type mismatch in
// the request's terms ("Job.Priority: expected int, got string").
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "empty body"
	}
	return err.Error()
}

// jsonFrame is one open object or array while scanning.
type jsonFrame struct {
	object bool
	// commas seen at this level: the current element's index.
	commas int
	// key is the current member's name (raw, as written) in an object.
	key []byte
}

// checkJSONLimits scans a JSON text for nesting past
// structs.MaxNestingDepth and collections past
// structs.MaxCollectionElements. It only tracks strings and brackets; the
// decoder that runs next checks the syntax. Cheap next to decoding: one
// pass, no allocation beyond the stack of open levels.
func checkJSONLimits(b []byte) error {
	stack := make([]jsonFrame, 0, 16)
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			j := i + 1
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if expectKey && len(stack) > 0 {
				stack[len(stack)-1].key = b[i+1 : min(j, len(b))]
				expectKey = false
			}
			i = j
		case '{', '[':
			if len(stack) >= structs.MaxNestingDepth {
				return structs.ErrNestingTooDeep(jsonPath(stack, len(stack)))
			}
			stack = append(stack, jsonFrame{object: b[i] == '{'})
			expectKey = b[i] == '{'
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			if len(stack) == 0 {
				continue
			}
			top := &stack[len(stack)-1]
			top.commas++
			if top.commas >= structs.MaxCollectionElements {
				return structs.ErrTooManyElements(jsonPath(stack, len(stack)-1), top.commas+1)
			}
			expectKey = top.object
		}
	}
	return nil
}

// jsonPathSegments is how much of a path an error shows: enough to find
// the place in a job, short enough to read when the input is very deep.
const jsonPathSegments = 12

// jsonPath renders where the first n open levels point to, as
// Job.TaskGroups[0].Tasks[1].Config.
func jsonPath(stack []jsonFrame, n int) string {
	var b strings.Builder
	for i, f := range stack[:n] {
		if i == jsonPathSegments {
			b.WriteString("…")
			break
		}
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.commas) + "]")
		}
	}
	if b.Len() == 0 {
		return "request body"
	}
	return b.String()
}

// Package jsoninput decodes untrusted JSON request bodies within drover's
// input limits: nesting up to structs.MaxNestingDepth, collections up to
// structs.MaxCollectionElements, and no null element in a typed array or
// map. Every refusal names the offending place in the body
// (Job.TaskGroups[0].Tasks[1].Config). It knows nothing of HTTP: reading
// the body and its size cap stay with core/httpapi.
package jsoninput

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// Decode decodes one JSON value into out after checking it against the
// input limits, then refuses null elements of typed arrays and maps. Every
// error names the field.
func Decode(body []byte, out any) error {
	if err := CheckLimits(body); err != nil {
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

// CheckLimits scans a JSON text for nesting past
// structs.MaxNestingDepth and collections past
// structs.MaxCollectionElements. It only tracks strings and brackets; the
// decoder that runs next checks the syntax. Cheap next to decoding: one
// pass, no allocation beyond the stack of open levels.
func CheckLimits(b []byte) error {
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

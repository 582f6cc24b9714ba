package pipeline

import (
	"fmt"
	"strconv"
	"strings"
)

// Expressions, the whole language:
//
//	${{ inputs.NAME }}                        the value of an input
//	${{ stages.S.steps.T.outputs.KEY }}       an output of an earlier step
//
// Spaces inside the braces are optional. They may appear in a step's
// environment values, HTTP URL, header values and body, a kubernetes
// step's namespace and manifest values (see manifestTexts), and (with
// unsafeExpressions, see checkUnsafe) its script and container command.
// Any other text that starts with "${{" is an error, so a typo never
// reaches a delegate as literal text; "$${{" is the escape and stands for
// the literal "${{". The value is inserted as it is, which is why scripts
// take values through env (`env: {V: "${{ … }}"}` and "$V"): an output
// or a webhook payload's field cannot become shell code. What a value and
// a step expand to is bounded (MaxExpandedValue, MaxExpandedTask).

const (
	exprOpen   = "${{"
	exprEscape = "$${{"
	exprClose  = "}}"
	// maxExprLen bounds the text between the braces.
	maxExprLen = 4 * (MaxNameLen + 16)
)

// Ref is what an expression refers to: an input (Input set) or the output
// Key of step Step.
type Ref struct {
	Input string
	Step  StepRef
	Key   string
}

func (r Ref) String() string {
	if r.Input != "" {
		return "inputs." + r.Input
	}
	return "stages." + r.Step.Stage + ".steps." + r.Step.Step + ".outputs." + r.Key
}

// scanExpr walks s: lit receives literal pieces (escapes undone), ref each
// reference in order; it stops at the first error of either.
func scanExpr(s string, lit func(string), ref func(Ref) error) error {
	for {
		i := strings.Index(s, exprOpen)
		if i < 0 {
			lit(s)
			return nil
		}
		if i > 0 && s[i-1] == '$' {
			lit(s[:i-1])
			lit(exprOpen)
			s = s[i+len(exprOpen):]
			continue
		}
		lit(s[:i])
		rest := s[i+len(exprOpen):]
		j := strings.Index(rest, exprClose)
		if j < 0 || j > maxExprLen {
			return malformedExpr(s[i:], "no closing }}")
		}
		r, err := parseRef(strings.TrimSpace(rest[:j]))
		if err != nil {
			return malformedExpr(s[i:], err.Error())
		}
		if err := ref(r); err != nil {
			return err
		}
		s = rest[j+len(exprClose):]
	}
}

func parseRef(e string) (Ref, error) {
	parts := strings.Split(e, ".")
	switch {
	case len(parts) == 2 && parts[0] == "inputs":
		if err := checkName("input", parts[1]); err != nil {
			return Ref{}, err
		}
		return Ref{Input: parts[1]}, nil
	case len(parts) == 6 && parts[0] == "stages" && parts[2] == "steps" && parts[4] == "outputs":
		if err := checkName("stage", parts[1]); err != nil {
			return Ref{}, err
		}
		if err := checkName("step", parts[3]); err != nil {
			return Ref{}, err
		}
		if err := checkOutputKey(parts[5]); err != nil {
			return Ref{}, err
		}
		return Ref{Step: StepRef{parts[1], parts[3]}, Key: parts[5]}, nil
	}
	return Ref{}, fmt.Errorf("write inputs.NAME or stages.STAGE.steps.STEP.outputs.KEY")
}

func malformedExpr(at, why string) error {
	const show = 60
	if len(at) > show {
		at = at[:show] + "…"
	}
	return fmt.Errorf("malformed expression %s: %s (and $${{ for the literal text ${{)", strconv.QuoteToASCII(at), why)
}

// Refs returns the references of s in order (repeats included).
func Refs(s string) ([]Ref, error) {
	if !strings.Contains(s, exprOpen) {
		return nil, nil
	}
	var out []Ref
	err := scanExpr(s, func(string) {}, func(r Ref) error { out = append(out, r); return nil })
	return out, err
}

// Expand replaces each expression of s with value(ref) and undoes the
// escapes; the first error of value or of the syntax is returned, and an
// *ExpandError when the result would pass MaxExpandedValue bytes.
func Expand(s string, value func(Ref) (string, error)) (string, error) {
	return expand(s, value, MaxExpandedTask)
}

// ExpandError: what expressions expand to is over a limit.
type ExpandError struct {
	// Limit is MaxExpandedValue or MaxExpandedTask, whichever was passed.
	Limit int
	msg   string
}

func (e *ExpandError) Error() string { return e.msg }

// expand is Expand with room bytes left for the whole task: the result is
// checked against both limits before each piece is written, so it never
// grows past them.
func expand(s string, value func(Ref) (string, error), room int) (string, error) {
	var b strings.Builder
	add := func(piece string) error {
		if err := overLimit(b.Len()+len(piece), room); err != nil {
			return err
		}
		b.WriteString(piece)
		return nil
	}
	if !strings.Contains(s, exprOpen) {
		if err := overLimit(len(s), room); err != nil {
			return "", err
		}
		return s, nil
	}
	b.Grow(min(len(s), room))
	var litErr error
	err := scanExpr(s, func(l string) {
		if litErr == nil {
			litErr = add(l)
		}
	}, func(r Ref) error {
		if litErr != nil {
			return litErr
		}
		v, err := value(r)
		if err != nil {
			return err
		}
		return add(v)
	})
	if err == nil {
		err = litErr
	}
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// overLimit: an *ExpandError when a value of n bytes is over
// MaxExpandedValue or over the room left for the task.
func overLimit(n, room int) error {
	switch {
	case n > MaxExpandedValue:
		return &ExpandError{Limit: MaxExpandedValue, msg: fmt.Sprintf("expands to more than %d bytes: at most %d bytes per value once expressions are replaced; reference a large input or output once (through env) instead of many times", MaxExpandedValue, MaxExpandedValue)}
	case n > room:
		return &ExpandError{Limit: MaxExpandedTask, msg: fmt.Sprintf("the step's fields expand to more than %d bytes in all: at most %d bytes per task once expressions are replaced; reference large inputs and outputs fewer times", MaxExpandedTask, MaxExpandedTask)}
	}
	return nil
}

// Limits of what expressions expand to: a value is one field of a step
// (its script, an environment value, a header, the body, the URL, an
// argument of its command) after expansion; a task is all of them.
const (
	MaxExpandedValue = 256 << 10
	MaxExpandedTask  = 1 << 20
)

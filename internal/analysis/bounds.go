package analysis

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// Bounds of one condition. expr counts the elements of ranges, arrays, maps and loop scopes
// against the VM's memory budget, but not the bytes a string function builds, and it counts
// what a function built only after building it: repeat("<990 bytes>", 1000000) allocated
// almost 1 GiB before the budget noticed. So every builtin whose output grows with its input
// is called through a wrapper that charges the evaluation's text budget first (see
// boundedBuiltins), and so is `+`, which doubles a string in a loop.
const (
	// maxConditionNodes bounds the expression's syntax tree; a condition is at most 1024
	// characters, so this only refuses pathological nesting.
	maxConditionNodes = 300
	// maxConditionElements is the VM's memory budget: the elements of every range, array, map
	// and loop of one evaluation together. It also bounds the iterations of all loops.
	maxConditionElements = 100_000
	// maxConditionText is how many bytes of strings and copied collections one evaluation may
	// build: a few times the largest answer a provider reads (maxResponseBytes), so
	// lower(result) still works on it more than once.
	maxConditionText = 4 << 20
)

// textBudget is what an evaluation may still build; every evaluation gets a fresh one.
type textBudget struct{ left int }

func (b *textBudget) spend(fn string, n int) error {
	if n > b.left {
		return fmt.Errorf("%s would build %d more bytes than a condition may (%d in all); compare values instead of building text", fn, n-b.left, maxConditionText)
	}
	b.left -= n
	return nil
}

// boundedBuiltins are the builtins whose output grows with their input, with what a call
// costs before it runs. The others return a number, a bool, a part of their input, or count
// what they allocate against the VM's memory budget (concat, flatten, sort, reverse).
var boundedBuiltins = map[string]func(args []any, left int) int{
	"repeat":     repeatCost,
	"replace":    replaceCost,
	"join":       inputCost,
	"toJSON":     inputCost,
	"string":     inputCost,
	"upper":      inputCost,
	"lower":      inputCost,
	"split":      inputCost,
	"splitAfter": inputCost,
	"fromJSON":   inputCost,
	"toBase64":   inputCost,
	"fromBase64": inputCost,
	"take":       inputCost,
	"keys":       inputCost,
	"values":     inputCost,
	"toPairs":    inputCost,
	"fromPairs":  inputCost,
	"uniq":       inputCost,
	"median":     inputCost,
}

// budgetVariable is the environment's name for the evaluation's textBudget.
const budgetVariable = "__budget"

// conditionOptions compiles a condition: typed environment, boolean result, node limit, and
// the bounded builtins in place of expr's own.
func conditionOptions() []expr.Option {
	opts := []expr.Option{
		expr.Env(conditionEnv{}), expr.AsBool(), expr.MaxNodes(maxConditionNodes),
		expr.Patch(boundCalls{}),
		expr.Function("__add", boundedAdd),
	}
	for name, cost := range boundedBuiltins {
		opts = append(opts, expr.Function("__"+name, boundedBuiltin(name, cost)))
	}
	return opts
}

// boundCalls rewrites `a + b` to __add(__budget, a, b) and every bounded builtin f(x) to
// __f(__budget, x), before the expression is type-checked.
type boundCalls struct{}

func (boundCalls) Visit(node *ast.Node) {
	budget := &ast.IdentifierNode{Value: budgetVariable}
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator == "+" {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__add"}, Arguments: []ast.Node{budget, n.Left, n.Right}})
		}
	case *ast.BuiltinNode:
		if boundedBuiltins[n.Name] != nil {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__" + n.Name}, Arguments: append([]ast.Node{budget}, n.Arguments...)})
		}
	}
}

func budgetOf(fn string, params []any) (*textBudget, []any, error) {
	if len(params) > 0 {
		if b, ok := params[0].(*textBudget); ok && b != nil {
			return b, params[1:], nil
		}
	}
	return nil, nil, fmt.Errorf("%s: call it as %s(...)", fn, strings.TrimPrefix(fn, "__"))
}

// boundedAdd is `+`: strings are charged before they are joined; everything else is expr's
// own addition (numbers, a time and a duration).
func boundedAdd(params ...any) (any, error) {
	b, args, err := budgetOf("__add", params)
	if err != nil {
		return nil, err
	}
	if len(args) != 2 {
		return nil, errors.New("+ takes two operands")
	}
	if x, ok := args[0].(string); ok {
		if y, ok := args[1].(string); ok {
			if err := b.spend("+", len(x)+len(y)); err != nil {
				return nil, err
			}
			return x + y, nil
		}
	}
	return runtime.Add(args[0], args[1]), nil
}

// boundedBuiltin charges a call's cost, then runs expr's builtin.
func boundedBuiltin(name string, cost func([]any, int) int) func(params ...any) (any, error) {
	fn := builtin.Builtins[builtin.Index[name]]
	return func(params ...any) (any, error) {
		b, args, err := budgetOf("__"+name, params)
		if err != nil {
			return nil, err
		}
		if err := b.spend(name, cost(args, b.left)); err != nil {
			return nil, err
		}
		switch {
		case fn.Fast != nil:
			if len(args) != 1 {
				return nil, fmt.Errorf("%s takes one argument, got %d", name, len(args))
			}
			return fn.Fast(args[0]), nil
		case fn.Func != nil:
			return fn.Func(args...)
		default:
			out, _, err := fn.Safe(args...)
			return out, err
		}
	}
}

// repeatCost is the length of repeat(s, n), computed without building it.
func repeatCost(args []any, left int) int {
	if len(args) != 2 {
		return 0 // expr's repeat reports the mistake
	}
	s, _ := args[0].(string)
	n := runtime.ToInt(args[1])
	if n <= 0 || len(s) == 0 {
		return 0
	}
	if len(s) > (left+1)/n+1 {
		return left + 1
	}
	return len(s) * n
}

// replaceCost is the length of replace(s, old, new[, n]).
func replaceCost(args []any, left int) int {
	if len(args) < 3 {
		return 0
	}
	s, _ := args[0].(string)
	old, _ := args[1].(string)
	repl, _ := args[2].(string)
	count := strings.Count(s, old)
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	}
	if len(args) == 4 {
		if n := runtime.ToInt(args[3]); n >= 0 && n < count {
			count = n
		}
	}
	grow := len(repl) - len(old)
	if grow <= 0 {
		return len(s)
	}
	if count > (left+1)/grow+1 {
		return left + 1
	}
	return len(s) + count*grow
}

// inputCost charges a call the size of its arguments as text: what a function whose output
// grows with its input may build.
func inputCost(args []any, left int) int {
	n := 0
	for _, a := range args {
		n += textSize(reflect.ValueOf(a), 0, left+1-n)
		if n > left {
			break
		}
	}
	return n
}

// textSize estimates v written out as indented JSON: strings by their length, scalars as 24
// bytes, each element with its indentation. It stops counting past limit, so a huge value
// costs no more than the budget to measure.
func textSize(v reflect.Value, depth, limit int) int {
	if limit <= 0 {
		return 1
	}
	switch v.Kind() {
	case reflect.Invalid:
		return 4
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 4
		}
		return textSize(v.Elem(), depth, limit)
	case reflect.String:
		return v.Len() + 2
	case reflect.Slice, reflect.Array:
		n := 2
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += 2*depth + 4 + textSize(v.Index(i), depth+1, limit-n)
		}
		return n
	case reflect.Map:
		n := 2
		for it := v.MapRange(); it.Next() && n <= limit; {
			n += 2*depth + 6 + textSize(it.Key(), depth+1, limit-n)
			n += textSize(it.Value(), depth+1, limit-n)
		}
		return n
	default:
		return 24
	}
}

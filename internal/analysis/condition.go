package analysis

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	rolloutv1alpha1 "github.com/flotilla-dev/flotilla/api/rollout/v1alpha1"
)

// conditionEnv declares `result` as any: its type depends on the provider, so it is checked
// when the condition runs. Budget is the evaluation's allowance for the text it builds; the
// compiler passes it to the bounded string functions (see boundStrings).
type conditionEnv struct {
	Result any         `expr:"result"`
	Budget *textBudget `expr:"__budget"`
}

// maxCachedPrograms bounds the cache; expressions come from user objects, so their number is
// not ours to choose. Dropping the whole cache when full is enough: recompiling is cheap.
const maxCachedPrograms = 1024

var programs = struct {
	sync.Mutex
	byExpr map[string]*vm.Program
}{byExpr: map[string]*vm.Program{}}

// compileCondition compiles a boolean expression over `result`, once per expression string.
func compileCondition(expression string) (*vm.Program, error) {
	programs.Lock()
	p, ok := programs.byExpr[expression]
	programs.Unlock()
	if ok {
		return p, nil
	}
	p, err := expr.Compile(expression, conditionOptions()...)
	if err != nil {
		return nil, firstLine(err)
	}
	programs.Lock()
	if len(programs.byExpr) >= maxCachedPrograms {
		programs.byExpr = map[string]*vm.Program{}
	}
	programs.byExpr[expression] = p
	programs.Unlock()
	return p, nil
}

// evalCondition evaluates a compiled condition against a measured value.
func evalCondition(field, expression string, result any) (bool, error) {
	p, err := compileCondition(expression)
	if err != nil {
		return false, fmt.Errorf("%s %q does not compile: %w", field, Shorten(expression, 200), err)
	}
	machine := vm.VM{MemoryBudget: maxConditionElements}
	out, err := machine.Run(p, conditionEnv{Result: result, Budget: &textBudget{left: maxConditionText}})
	if err != nil {
		// The expression is shortened: the reason at the end must survive the message's limit.
		return false, fmt.Errorf("%s %q on result %s: %w", field, Shorten(expression, 200), Shorten(formatValue(result), 200), firstLine(err))
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("%s %q returned %T, not a bool", field, Shorten(expression, 200), out)
	}
	return b, nil
}

// firstLine drops the source excerpt expr appends to its errors: the position in the first
// line says the same, and status messages read better on one line.
func firstLine(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(msg)
}

// Judge decides the phase of one measurement from its value. An expression that cannot be
// evaluated is an error: the caller records an Error measurement with its message.
func Judge(metric rolloutv1alpha1.Metric, result any) (rolloutv1alpha1.AnalysisPhase, error) {
	if metric.Compare != nil {
		// The canary against its baseline first; the conditions, if any, then judge the
		// canary's own value.
		cmp, ok := result.(comparison)
		if !ok {
			return rolloutv1alpha1.AnalysisError, fmt.Errorf("compare: the measurement holds no canary and baseline values")
		}
		if within, _ := cmp.judge(metric.Compare); !within {
			return rolloutv1alpha1.AnalysisFailed, nil
		}
		metric.Compare, result = nil, cmp.result
		if metric.SuccessCondition == "" && metric.FailureCondition == "" {
			return rolloutv1alpha1.AnalysisSuccessful, nil
		}
	}
	if metric.Provider.Job != nil && metric.SuccessCondition == "" && metric.FailureCondition == "" {
		// A Job's own outcome is its verdict, as the JobMetric API promises.
		if ok, _ := result.(bool); ok {
			return rolloutv1alpha1.AnalysisSuccessful, nil
		}
		return rolloutv1alpha1.AnalysisFailed, nil
	}
	if metric.FailureCondition != "" {
		failed, err := evalCondition("failureCondition", metric.FailureCondition, result)
		if err != nil {
			return rolloutv1alpha1.AnalysisError, err
		}
		if failed {
			return rolloutv1alpha1.AnalysisFailed, nil
		}
	}
	if metric.SuccessCondition == "" {
		return rolloutv1alpha1.AnalysisSuccessful, nil
	}
	succeeded, err := evalCondition("successCondition", metric.SuccessCondition, result)
	if err != nil {
		return rolloutv1alpha1.AnalysisError, err
	}
	switch {
	case succeeded:
		return rolloutv1alpha1.AnalysisSuccessful, nil
	case metric.FailureCondition != "":
		return rolloutv1alpha1.AnalysisInconclusive, nil
	default:
		return rolloutv1alpha1.AnalysisFailed, nil
	}
}

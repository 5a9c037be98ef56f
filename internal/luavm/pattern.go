package luavm

import (
	"fmt"
	"math"
	"time"
)

// gopher-lua matches Lua patterns with a recursive backtracking VM (package pm) that cannot be
// interrupted: a call's deadline is not seen until it returns, which for a pattern such as
// string.rep("a*", 30) .. "b" is never. It also recurses once per character a quantifier
// consumes, so "^.*$" on a few MiB grows the goroutine stack by GiBs. patternBound computes,
// before pm runs, upper bounds of both from the pattern and the subject, and the bounded
// string functions refuse a call whose bounds are over the call's limits.
//
// The step bound: for one start position, each quantified item i can stop after 0..r_i
// characters, where r_i is the longest run of subject characters its class matches (1 for
// '?'); pm tries at most Π(r_i+1) combinations of the first j items at depth j, each costing
// at most the pattern's instructions to reach the next choice. Items whose work depends on
// the subject but that do not branch (%b, %1-%9) are counted as quantifiers of the whole
// subject. Unanchored patterns start at every position.

// patternStepTime is what one step of the bound costs on a slow machine; the step budget of
// a call is its Timeout divided by it. pm measured 14-24ns per instruction; steps count
// instructions.
const patternStepTime = 25 * time.Nanosecond

// patternFrameBytes is the goroutine stack one level of pm's recursion takes, doubled for
// the copy when the stack grows (measured: about 270-340 bytes).
const patternFrameBytes = 2 * 320

// matchCost is the memory of one match pm collects (gsub and gmatch collect all first).
const matchCost = 64

type patternBound struct {
	steps   float64 // pm instructions, at most
	depth   float64 // recursion depth, at most
	matches float64 // matches collected, at most (gsub, gmatch)
}

// classSet holds, for each byte, whether a pattern class matches it.
type classSet [256]bool

type patternItem struct {
	class classSet
	quant byte // 0, '*', '+', '-', '?'
	heavy bool // %b or a back reference: subject-long work without a choice
}

// parsePatternItems splits p the way pm parses it; ok is false for patterns pm refuses
// (it then reports the error itself, without matching).
func parsePatternItems(p string) (items []patternItem, anchored bool, captures int, ok bool) {
	i := 0
	if i < len(p) && p[i] == '^' {
		anchored = true
		i++
	}
	lastSingle := false
	for i < len(p) {
		ch := p[i]
		switch {
		case ch == '(':
			i++
			captures++
			if i < len(p) && p[i] == ')' {
				i++
			}
			lastSingle = false
		case ch == ')':
			i++
			lastSingle = false
		case ch == '*' || ch == '+' || ch == '-' || ch == '?':
			i++
			if lastSingle {
				items[len(items)-1].quant = ch
				lastSingle = false
				continue
			}
			items = append(items, patternItem{class: literalClass(ch)})
			lastSingle = true
		case ch == '$' && i == len(p)-1:
			i++
		case ch == '%' && i+1 < len(p) && p[i+1] >= '1' && p[i+1] <= '9':
			i += 2
			items = append(items, patternItem{heavy: true})
			lastSingle = false
		case ch == '%' && i+1 < len(p) && p[i+1] == '0':
			return nil, false, 0, false
		case ch == '%' && i+1 < len(p) && p[i+1] == 'b':
			i += 4
			items = append(items, patternItem{heavy: true})
			lastSingle = false
		default:
			var c classSet
			if c, i, ok = parseClass(p, i, true); !ok {
				return nil, false, 0, false
			}
			items = append(items, patternItem{class: c})
			lastSingle = true
		}
	}
	return items, anchored, captures, true
}

// parseClass reads one class at p[i]: %x, '.', a [set] (when allowSet) or a literal byte.
func parseClass(p string, i int, allowSet bool) (classSet, int, bool) {
	ch := p[i]
	switch {
	case ch == '%':
		if i+1 >= len(p) {
			return classSet{}, i, false
		}
		return escapeClass(p[i+1]), i + 2, true
	case ch == '.' && allowSet:
		var c classSet
		for b := range c {
			c[b] = true
		}
		return c, i + 1, true
	case ch == '[' && allowSet:
		return parseSet(p, i+1)
	}
	return literalClass(ch), i + 1, true
}

func literalClass(ch byte) classSet {
	var c classSet
	c[ch] = true
	return c
}

// parseSet reads a set after its '['. As in pm, ']' and '-' first are literals, "a-z" is a
// range only between two literals, and a trailing '-' is a literal.
func parseSet(p string, i int) (classSet, int, bool) {
	negate := false
	if i < len(p) && p[i] == '^' {
		negate = true
		i++
	}
	type member struct {
		class   classSet
		literal int // the byte of a literal member, -1 otherwise
	}
	var members []member
	isRange := false
	for {
		if i >= len(p) {
			return classSet{}, i, false
		}
		ch := p[i]
		if ch == ']' && len(members) > 0 {
			i++
			break
		}
		if ch == '-' && len(members) > 0 {
			i++
			isRange = true
			continue
		}
		lit := -1
		if ch != '%' {
			lit = int(ch)
		}
		c, next, ok := parseClass(p, i, false)
		if !ok {
			return classSet{}, i, false
		}
		i = next
		members = append(members, member{c, lit})
		if isRange {
			begin, end := members[len(members)-2], members[len(members)-1]
			var r classSet
			if begin.literal >= 0 && end.literal >= 0 {
				for b := begin.literal; b <= end.literal; b++ {
					r[b] = true
				}
			}
			members = append(members[:len(members)-2], member{r, -1})
			isRange = false
		}
	}
	if isRange {
		members = append(members, member{literalClass('-'), '-'})
	}
	var set classSet
	for b := range set {
		in := false
		for _, m := range members {
			in = in || m.class[b]
		}
		set[b] = in != negate
	}
	return set, i, true
}

// escapeClass is %x: the Lua classes in ASCII, as pm defines them; other bytes stand for
// themselves.
func escapeClass(x byte) classSet {
	var c classSet
	lower := x | 0x20
	var in func(b int) bool
	switch lower {
	case 'a':
		in = func(b int) bool { return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' }
	case 'c':
		in = func(b int) bool { return b <= 0x1f || b == 0x7f }
	case 'd':
		in = func(b int) bool { return '0' <= b && b <= '9' }
	case 'l':
		in = func(b int) bool { return 'a' <= b && b <= 'z' }
	case 'p':
		in = func(b int) bool {
			return 0x21 <= b && b <= 0x2f || 0x3a <= b && b <= 0x40 || 0x5b <= b && b <= 0x60 || 0x7b <= b && b <= 0x7e
		}
	case 's':
		in = func(b int) bool { return b == ' ' || b >= '\t' && b <= '\r' }
	case 'u':
		in = func(b int) bool { return 'A' <= b && b <= 'Z' }
	case 'w':
		in = func(b int) bool { return '0' <= b && b <= '9' || 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' }
	case 'x':
		in = func(b int) bool { return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' }
	case 'z':
		in = func(b int) bool { return b == 0 }
	default:
		c[x] = true
		return c
	}
	negate := x != lower
	for b := range c {
		c[b] = in(b) != negate
	}
	return c
}

// boundPattern returns the bounds of matching p against subject; ok is false for a pattern pm
// refuses, which then needs no bound.
func boundPattern(p, subject string) (patternBound, bool) {
	items, anchored, captures, ok := parsePatternItems(p)
	if !ok {
		return patternBound{}, false
	}
	n := float64(len(subject))
	insts := float64(3*len(items) + 2*captures + 4)
	runs := map[classSet]float64{}
	var bound patternBound
	level, nodes := 1.0, 1.0
	minLen := 0.0
	for _, it := range items {
		var r float64
		switch {
		case it.heavy:
			r = n
		case it.quant == 0:
			minLen++
			continue
		default:
			var seen bool
			if r, seen = runs[it.class]; !seen {
				r = float64(longestRun(subject, &it.class))
				runs[it.class] = r
			}
			if it.quant == '?' {
				r = min(r, 1)
			}
			if it.quant == '+' {
				minLen++
			}
		}
		bound.depth += r
		level *= r + 1
		nodes += level
		if math.IsInf(nodes, 0) || nodes > 1e300 {
			nodes = math.Inf(1)
			break
		}
	}
	starts := n + 1
	if anchored {
		starts = 1
	}
	bound.steps = starts * nodes * insts
	bound.depth += float64(len(items) + 2*captures + 2)
	bound.matches = n/max(minLen, 1) + 1
	return bound, true
}

func longestRun(s string, c *classSet) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if c[s[i]] {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// checkPattern refuses a match whose bounds are over the call's limits, and charges its stack
// (and, when all matches are collected, their memory) to the call.
func checkPattern(fn, p, subject string, allMatches bool, limits Limits, charge func(int64, string)) error {
	b, ok := boundPattern(p, subject)
	if !ok {
		return nil
	}
	maxSteps := float64(limits.Timeout / patternStepTime)
	if b.steps > maxSteps {
		return fmt.Errorf("%s: pattern %q on a subject of %d bytes could take up to %.3g matching steps, over the limit of %.3g for the time limit of %s (the pattern matcher cannot be interrupted); use fewer quantifiers (*, +, -, ?) or a shorter subject",
			fn, truncate(p, 40), len(subject), b.steps, maxSteps, limits.Timeout)
	}
	mem := b.depth * patternFrameBytes
	if allMatches {
		mem += b.matches * matchCost
	}
	charge(int64(mem), fmt.Sprintf("%s: matching pattern %q on %d bytes", fn, truncate(p, 40), len(subject)))
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

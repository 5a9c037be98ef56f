package cli

import (
	"io"
	"os"
)

// safeWriter drops the control characters a terminal would act on (ESC and the other C0
// codes but tab, newline and carriage return; DEL) from everything the CLI prints. What it
// prints comes partly from tenants (descriptions, condition messages reported by members,
// release messages): an escape sequence there could rewrite an admin's terminal, hide a line
// or retitle the window. JSON and YAML output escape such characters themselves, so nothing
// structured is lost. The live release tree redraws through raw, which bypasses the filter.
type safeWriter struct {
	w io.Writer
}

func (s *safeWriter) Write(p []byte) (int, error) {
	clean := p
	for i, b := range p {
		if unsafeControl(b) {
			clean = make([]byte, 0, len(p))
			clean = append(clean, p[:i]...)
			for _, b := range p[i:] {
				if !unsafeControl(b) {
					clean = append(clean, b)
				}
			}
			break
		}
	}
	if _, err := s.w.Write(clean); err != nil {
		return 0, err
	}
	return len(p), nil
}

func unsafeControl(b byte) bool {
	return (b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7f
}

// raw is the stream under the filter, for the CLI's own escape sequences.
func raw(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}

// terminal reports whether w (under the filter) is a terminal.
func terminal(w io.Writer) (*os.File, bool) {
	f, ok := raw(w).(*os.File)
	return f, ok
}

package analysisrun

import (
	"net/netip"
	"time"

	"github.com/flotilla-dev/flotilla/internal/analysis"
)

var (
	t0           = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testLoopback = analysis.NewEgress([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
)

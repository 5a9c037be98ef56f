package analysis

import "net/netip"

// testLoopback lets providers reach httptest servers, which listen on 127.0.0.1.
var testLoopback = NewEgress([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})

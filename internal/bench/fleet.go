package bench

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/flotilla-dev/flotilla/internal/localfleet"
)

// FleetRSS is the resident memory of a local fleet's processes, by role. RSS counts the
// pages of a binary shared by its instances in each of them (about 90 MiB of kube-apiserver's
// text per member); PSS divides shared pages among the processes that map them, so PSS summed
// is what the machine holds. The PSS also counts the supervisors (a `flotilla supervise` per
// process), which RSS leaves out.
type FleetRSS struct {
	// MemberTools is the RSS of the member processes summed over all members, by tool
	// (kube-apiserver, kwok, and for full members kube-controller-manager and kube-scheduler).
	MemberTools map[string]int64
	// ControlPlane is the control plane's apiserver and kube-controller-manager.
	ControlPlane int64
	Etcd         int64
	Manager      int64
	// PSS of all members' processes, of the control plane's apiserver and
	// kube-controller-manager, and of the whole fleet, each with their supervisors.
	MembersPSS, ControlPlanePSS, TotalPSS int64
}

// FleetMemory sums the RSS of every component of a fleet's status by role.
func FleetMemory(status []localfleet.ComponentStatus) FleetRSS {
	r := FleetRSS{MemberTools: map[string]int64{}}
	for _, s := range status {
		pss := pssBytes(s.PID) + pssBytes(s.SupervisorPID)
		r.TotalPSS += pss
		if s.Cluster != localfleet.ControlPlaneName {
			r.MembersPSS += pss
		}
		switch {
		case s.Name == "flotilla-controller-manager":
			r.Manager += s.RSSBytes
		case s.Name == "etcd":
			r.Etcd += s.RSSBytes
		case s.Cluster == localfleet.ControlPlaneName:
			r.ControlPlane += s.RSSBytes
			r.ControlPlanePSS += pss
		default:
			r.MemberTools[s.Tool] += s.RSSBytes
		}
	}
	return r
}

// Members is the RSS of all member processes.
func (r FleetRSS) Members() int64 {
	var sum int64
	for _, v := range r.MemberTools {
		sum += v
	}
	return sum
}

// Total is the RSS of every process of the fleet.
func (r FleetRSS) Total() int64 { return r.Members() + r.ControlPlane + r.Etcd + r.Manager }

// Extrapolate estimates the fleet's RSS at n members from a fleet of measured members: the
// control plane stays, the members, etcd and the controller-manager grow with the members.
// etcd and the manager have a fixed part too, so the estimate errs high.
func (r FleetRSS) Extrapolate(measured, n int) int64 {
	if measured == 0 {
		return 0
	}
	return r.ControlPlane + (r.Members()+r.Etcd+r.Manager)*int64(n)/int64(measured)
}

// ExtrapolatePSS is Extrapolate for the PSS.
func (r FleetRSS) ExtrapolatePSS(measured, n int) int64 {
	if measured == 0 {
		return 0
	}
	return r.ControlPlanePSS + (r.TotalPSS-r.ControlPlanePSS)*int64(n)/int64(measured)
}

// pssBytes is the proportional set size of a process, 0 when it is gone.
func pssBytes(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// Report prints the figures of a fleet of n members.
func (r FleetRSS) Report(n int) string {
	if n == 0 {
		return ""
	}
	var b strings.Builder
	tools := make([]string, 0, len(r.MemberTools))
	for t := range r.MemberTools {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	parts := make([]string, len(tools))
	for i, t := range tools {
		parts[i] = fmt.Sprintf("%s %d", t, r.MemberTools[t]/int64(n)>>20)
	}
	fmt.Fprintf(&b, "RSS per member (avg of %d): %6d MiB (%s)\n", n, r.Members()/int64(n)>>20, strings.Join(parts, " + "))
	fmt.Fprintf(&b, "RSS all members:            %6d MiB\n", r.Members()>>20)
	fmt.Fprintf(&b, "RSS control plane:          %6d MiB (apiserver+kcm) + etcd %d MiB (shared by all)\n", r.ControlPlane>>20, r.Etcd>>20)
	fmt.Fprintf(&b, "RSS controller-manager:     %6d MiB\n", r.Manager>>20)
	fmt.Fprintf(&b, "RSS whole fleet:            %6d MiB\n", r.Total()>>20)
	fmt.Fprintf(&b, "PSS per member (avg of %d): %6d MiB (shared binary pages divided, supervisors counted)\n", n, r.MembersPSS/int64(n)>>20)
	fmt.Fprintf(&b, "PSS whole fleet:            %6d MiB (what the machine holds)\n", r.TotalPSS>>20)
	if n < 100 {
		fmt.Fprintf(&b, "at 100 members:             %6.1f GiB RSS, %.1f GiB PSS (extrapolated: members, etcd and manager x %.1f)\n",
			float64(r.Extrapolate(n, 100))/(1<<30), float64(r.ExtrapolatePSS(n, 100))/(1<<30), 100/float64(n))
	}
	return b.String()
}

package manager

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// A memory limit for the Go heap. Left alone, the Go runtime lets the heap grow to twice what
// is live before it collects (GOGC=100), and the controller-manager's live heap is mostly
// informer caches, so its resident memory is two to three times what it holds. The manager
// collects at half that growth unless GOGC is set (gcPercent). A soft limit
// (runtime/debug.SetMemoryLimit) makes the collector work harder as the process nears it,
// instead of the kernel killing the container. It is a soft bound: the runtime caps the
// collector's share of CPU, so a live heap above the limit slows the process, it does not
// fail it.

// memoryLimitShare is the part of a container's memory limit given to the Go heap; the rest
// is for what the runtime does not count (stacks of goroutines mostly, memory the kernel has
// not taken back yet) and for the collector to keep ahead of allocation.
const memoryLimitShare = 0.9

// memoryLimit says which soft limit to set, in bytes, and where it comes from: flagMiB when
// positive; otherwise none when GOMEMLIMIT is set (the runtime has applied it); otherwise
// memoryLimitShare of the cgroup's memory limit, when there is one. 0 means no limit to set.
func memoryLimit(flagMiB int64, env func(string) (string, bool), cgroupLimit func() (int64, bool)) (int64, string) {
	if flagMiB > 0 {
		return flagMiB << 20, "--memory-limit-mib"
	}
	if v, ok := env("GOMEMLIMIT"); ok && v != "" {
		return 0, ""
	}
	if limit, ok := cgroupLimit(); ok {
		return int64(float64(limit) * memoryLimitShare), "the container's memory limit"
	}
	return 0, ""
}

// setMemoryLimit applies the collector's pace gcPercent chooses and the soft memory limit
// memoryLimit chooses, and logs them.
func setMemoryLimit(flagMiB int64, log logr.Logger) {
	if percent, ok := gcPercent(os.LookupEnv); ok {
		debug.SetGCPercent(percent)
		log.Info("Go collector's heap growth set", "gcPercent", percent, "from", "the default (GOGC unset)")
	}
	limit, from := memoryLimit(flagMiB, os.LookupEnv, cgroupMemoryLimit)
	if limit <= 0 {
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set", "limitMiB", limit>>20, "from", from)
}

// defaultGCPercent is how far the heap grows past what is live before the collector runs, when
// GOGC does not say: 50% instead of the runtime's 100%. Most of what is live is caches, which
// stay live, so at 100% the heap's peak is twice the caches; at 50% it is one and a half times
// them. The collector runs twice as often: at 20 slim members x 250 templates the manager's
// peak RSS was 288 MiB instead of 354 and its CPU for placing them 31 s instead of 25.
const defaultGCPercent = 50

// gcPercent says which heap growth to set: defaultGCPercent unless GOGC is set (the runtime has
// applied it, "off" included); false means leave the runtime's.
func gcPercent(env func(string) (string, bool)) (int, bool) {
	if v, ok := env("GOGC"); ok && v != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

// cgroupMemoryLimit is the memory limit of this process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes); false when there is none or it cannot be read.
func cgroupMemoryLimit() (int64, bool) {
	return cgroupMemoryLimitIn("/sys/fs/cgroup", "/proc/self/cgroup")
}

func cgroupMemoryLimitIn(root, selfCgroup string) (int64, bool) {
	var candidates []string
	if f, err := os.Open(selfCgroup); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			// hierarchy-ID:controllers:path; v2 is "0::/path", v1's memory line "N:memory:/path".
			parts := strings.SplitN(s.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				candidates = append(candidates, filepath.Join(root, parts[2], "memory.max"))
			case strings.Contains(","+parts[1]+",", ",memory,"):
				candidates = append(candidates, filepath.Join(root, "memory", parts[2], "memory.limit_in_bytes"))
			}
		}
		f.Close()
	}
	// Inside a container's cgroup namespace its own cgroup is the root.
	candidates = append(candidates, filepath.Join(root, "memory.max"), filepath.Join(root, "memory", "memory.limit_in_bytes"))
	for _, c := range candidates {
		data, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		n, err := strconv.ParseInt(v, 10, 64)
		// v2 says "no limit" with "max" (a parent may still limit), v1 with a huge number.
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			continue
		}
		return n, true
	}
	return 0, false
}

// validateMemoryLimit names the flag when its value makes no sense.
func validateMemoryLimit(mib int64) error {
	if mib < 0 || mib > 1<<30 {
		return fmt.Errorf("--memory-limit-mib %d: give 0 (90%% of the container's memory limit, if any) or the MiB the Go heap should stay under, for example 512", mib)
	}
	return nil
}

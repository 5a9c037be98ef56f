package manager

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	withEnv := func(string) (string, bool) { return "300MiB", true }
	container := func() (int64, bool) { return 1000 << 20, true }
	noContainer := func() (int64, bool) { return 0, false }
	for _, tc := range []struct {
		name     string
		flagMiB  int64
		env      func(string) (string, bool)
		cgroup   func() (int64, bool)
		want     int64
		wantFrom string
	}{
		{"flag", 256, withEnv, container, 256 << 20, "--memory-limit-mib"},
		{"container", 0, noEnv, container, 900 << 20, "the container's memory limit"},
		{"GOMEMLIMIT is the runtime's", 0, withEnv, container, 0, ""},
		{"no limit anywhere", 0, noEnv, noContainer, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from := memoryLimit(tc.flagMiB, tc.env, tc.cgroup)
			if got != tc.want || from != tc.wantFrom {
				t.Errorf("memoryLimit = %d from %q, want %d from %q", got, from, tc.want, tc.wantFrom)
			}
		})
	}
	if validateMemoryLimit(-1) == nil || validateMemoryLimit(0) != nil || validateMemoryLimit(512) != nil {
		t.Error("validateMemoryLimit: want -1 refused, 0 and 512 taken")
	}
}

func TestGCPercent(t *testing.T) {
	if got, ok := gcPercent(func(string) (string, bool) { return "", false }); !ok || got != defaultGCPercent {
		t.Errorf("without GOGC: %d, %v; want %d, true", got, ok, defaultGCPercent)
	}
	if _, ok := gcPercent(func(string) (string, bool) { return "200", true }); ok {
		t.Error("with GOGC=200: a percent to set; want the runtime's (GOGC) left alone")
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		self   string
		files  map[string]string
		want   int64
		wantOK bool
	}{
		{"v2 in a cgroup namespace", "0::/\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20, true},
		{"v2 unlimited", "0::/\n", map[string]string{"memory.max": "max\n"}, 0, false},
		{"v2 by path", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "268435456\n"}, 256 << 20, true},
		{"v1 by path", "4:memory:/process_api/x\n3:cpuset:/\n", map[string]string{"memory/process_api/x/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, true},
		{"v1 unlimited", "4:memory:/\n", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"nothing to read", "", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, d := range tc.files {
				write(t, filepath.Join(root, "fs", p), d)
			}
			write(t, filepath.Join(root, "self"), tc.self)
			got, ok := cgroupMemoryLimitIn(filepath.Join(root, "fs"), filepath.Join(root, "self"))
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("cgroupMemoryLimitIn = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

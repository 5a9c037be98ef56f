package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	policyv1alpha1 "github.com/flotilla-dev/flotilla/api/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

// doublingStatus doubles a string 30 times: 1 GiB were nothing to stop it. It once took the
// controller-manager from 98 MiB to 4.6 GiB on one object in three members.
const doublingStatus = `function ReflectStatus(observedObj)
  local s = "x"
  for i = 1, 30 do s = s .. s end
  return {s = s}
end`

// Given a customization whose ReflectStatus doubles a string 30 times,
// when objects of its kind are propagated to every member,
// then each binding reports the interpreter failure naming the memory limit,
// and the controller-manager's resident memory stays under the bound luavm documents.
func TestLuaMemoryIsBoundedPerProcess(t *testing.T) {
	g := newG(t)
	ctx := context.Background()
	installCRD(t, g, "memory.flotilla.dev", "Balloon", "balloons")
	ns := "balloons"
	ensureNamespace(t, cp, ns)
	pid := managerPID(t)
	idle := procStatusBytes(t, pid, "VmRSS")
	resetPeak(t, pid)
	// The manager runs on this machine with the default limits, so its bound is computed here.
	bound := luavm.NewBudget(luavm.DefaultProcessLimits()).RSSBound(luavm.DefaultLimits(), 2*runtime.GOMAXPROCS(0))
	limit := idle + bound
	t.Logf("controller-manager RSS %d MiB before; bound %d MiB (idle + %d MiB)", idle>>20, limit>>20, bound>>20)

	ric := &configv1alpha1.ResourceInterpreterCustomization{
		ObjectMeta: metav1.ObjectMeta{Name: "balloon"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target:         configv1alpha1.CustomizationTarget{APIVersion: "memory.flotilla.dev/v1alpha1", Kind: "Balloon"},
			Customizations: configv1alpha1.CustomizationRules{StatusReflection: &configv1alpha1.LuaScript{LuaScript: doublingStatus}},
		},
	}
	createAll(t, g, ric)
	g.Eventually(customizationReady(ric.Name)).Should(gomega.Equal(metav1.ConditionTrue))
	createAll(t, g, &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "balloons", Namespace: ns},
		Spec: policyv1alpha1.PropagationSpec{
			ResourceSelectors: []policyv1alpha1.ResourceSelector{{APIVersion: "memory.flotilla.dev/v1alpha1", Kind: "Balloon"}},
			Placement:         policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: fleet.Fleet().Names()}},
		},
	})
	const objects = 10
	for i := range objects {
		b := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "memory.flotilla.dev/v1alpha1", "kind": "Balloon",
			"metadata": map[string]any{"name": fmt.Sprintf("b%d", i), "namespace": ns}, "spec": map[string]any{"size": int64(i)},
		}}
		g.Eventually(func() error { return cp.Create(ctx, b.DeepCopy()) }).Should(gomega.Succeed())
	}

	peak := int64(0)
	underBound := func() bool {
		peak = max(peak, procStatusBytes(t, pid, "VmHWM"))
		return peak <= limit
	}
	for i := range objects {
		name := fmt.Sprintf("b%d-balloon", i)
		g.Eventually(func() string {
			g.Expect(underBound()).To(gomega.BeTrue(), "controller-manager peak RSS %d MiB, over the bound of %d MiB", peak>>20, limit>>20)
			b := bindingOf(ctx, ns, name)
			if b == nil {
				return ""
			}
			if c := meta.FindStatusCondition(b.Status.Conditions, workv1alpha1.ConditionInterpreted); c != nil {
				return string(c.Status) + ": " + c.Message
			}
			return ""
		}).Should(gomega.And(gomega.HavePrefix("False: "),
			gomega.ContainSubstring("interpreter customization balloon, operation InterpretStatus"),
			gomega.ContainSubstring("memory limit")), name)
	}
	// Status is re-read on every member change and resync: the bound holds over time too.
	g.Consistently(underBound).WithTimeout(15*time.Second).WithPolling(500*time.Millisecond).Should(gomega.BeTrue(),
		"controller-manager peak RSS over the bound of %d MiB", limit>>20)
	t.Logf("controller-manager peak RSS %d MiB, bound %d MiB", peak>>20, limit>>20)
}

func managerPID(t *testing.T) int {
	t.Helper()
	for _, s := range fleet.Status() {
		if s.Name == "flotilla-controller-manager" && s.Running {
			return s.PID
		}
	}
	t.Fatal("the controller-manager is not running")
	return 0
}

// procStatusBytes reads a kB field (VmRSS, VmHWM) of /proc/PID/status.
func procStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the controller-manager's status: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeak starts a new VmHWM for the process, so earlier tests' peaks do not count.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the controller-manager's peak RSS: %v", err)
	}
}

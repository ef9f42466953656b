// Oracle for mco-kubeletconfig's golden cases: runs the original kubelet config controller's sync
// (openshift/machine-config-operator pkg/controller/kubelet-config, with its fake clients) on each
// case's input.yaml and writes what it did to the case's expected/ directory.
//
// Copy this file into pkg/controller/kubelet-config/ of a machine-config-operator checkout and run
//
//	MCO_ORACLE_CASES=/abs/path/to/crates/kubeletconfig/testdata/cases \
//	    go test -mod=vendor -count=1 -run TestOracle ./pkg/controller/kubelet-config/
//
// input.yaml holds: controllerConfig, pools, kubeletConfigs (every KubeletConfig of the cluster),
// machineConfigs (those that exist), apiServer, nodeConfig, featureGates {enabled, disabled} and
// sync (the name of the KubeletConfig to sync). expected/ gets:
//   - actions.json: the writes, in order: verb, resource, subresource, name, and the object
//     (MachineConfig uid and condition times removed: they are random / the clock; a
//     MachineConfig's spec.config is in its own file) or patch;
//   - config-<machineconfig>.json: the exact bytes of the last write of each MachineConfig's
//     spec.config;
//   - error.txt: what the sync returned ("" when nothing).
package kubeletconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	osev1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
)

type oracleInput struct {
	ControllerConfig *mcfgv1.ControllerConfig   `json:"controllerConfig"`
	Pools            []*mcfgv1.MachineConfigPool `json:"pools"`
	KubeletConfigs   []*mcfgv1.KubeletConfig     `json:"kubeletConfigs"`
	MachineConfigs   []*mcfgv1.MachineConfig     `json:"machineConfigs"`
	APIServer        *osev1.APIServer            `json:"apiServer"`
	NodeConfig       *osev1.Node                 `json:"nodeConfig"`
	FeatureGates     struct {
		Enabled  []osev1.FeatureGateName `json:"enabled"`
		Disabled []osev1.FeatureGateName `json:"disabled"`
	} `json:"featureGates"`
	Sync string `json:"sync"`
}

type oracleAction struct {
	Verb        string          `json:"verb"`
	Resource    string          `json:"resource"`
	Subresource string          `json:"subresource,omitempty"`
	Name        string          `json:"name,omitempty"`
	Object      json.RawMessage `json:"object,omitempty"`
	Patch       string          `json:"patch,omitempty"`
}

func TestOracle(t *testing.T) {
	root := os.Getenv("MCO_ORACLE_CASES")
	if root == "" {
		t.Skip("MCO_ORACLE_CASES not set")
	}
	dirs, err := filepath.Glob(filepath.Join(root, "*", "input.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases under %s: %v", root, err)
	}
	for _, input := range dirs {
		dir := filepath.Dir(input)
		t.Run(filepath.Base(dir), func(t *testing.T) { runOracleCase(t, dir) })
	}
}

func runOracleCase(t *testing.T, dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var in oracleInput
	if err := yaml.UnmarshalStrict(raw, &in); err != nil {
		t.Fatal(err)
	}
	cc := in.ControllerConfig
	cc.Status.Conditions = []mcfgv1.ControllerConfigStatusCondition{
		{Type: mcfgv1.TemplateControllerCompleted, Status: corev1.ConditionTrue},
		{Type: mcfgv1.TemplateControllerRunning, Status: corev1.ConditionFalse},
		{Type: mcfgv1.TemplateControllerFailing, Status: corev1.ConditionFalse},
	}

	f := newFixture(t)
	f.ccLister = append(f.ccLister, cc)
	f.mcpLister = append(f.mcpLister, in.Pools...)
	for _, kc := range in.KubeletConfigs {
		f.mckLister = append(f.mckLister, kc)
		f.objects = append(f.objects, kc)
	}
	for _, mc := range in.MachineConfigs {
		f.objects = append(f.objects, mc)
	}
	if in.APIServer != nil {
		f.apiserverLister = append(f.apiserverLister, in.APIServer)
		f.oseobjects = append(f.oseobjects, in.APIServer)
	}
	if in.NodeConfig != nil {
		f.nodeLister = append(f.nodeLister, in.NodeConfig)
		f.oseobjects = append(f.oseobjects, in.NodeConfig)
	}
	c := f.newController(ctrlcommon.NewFeatureGatesHardcodedHandler(in.FeatureGates.Enabled, in.FeatureGates.Disabled))

	syncErr := c.syncHandler(in.Sync)

	out := filepath.Join(dir, "expected")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var actions []oracleAction
	for _, action := range f.client.Actions() {
		a := oracleAction{Verb: action.GetVerb(), Resource: action.GetResource().Resource, Subresource: action.GetSubresource()}
		switch action := action.(type) {
		case core.CreateAction:
			a.Object = oracleObject(t, out, action.GetObject())
		case core.UpdateAction:
			a.Object = oracleObject(t, out, action.GetObject())
		case core.PatchAction:
			a.Name, a.Patch = action.GetName(), string(action.GetPatch())
		case core.DeleteAction:
			a.Name = action.GetName()
		default:
			continue
		}
		actions = append(actions, a)
	}
	writeJSON(t, filepath.Join(out, "actions.json"), actions)
	message := ""
	if syncErr != nil {
		message = syncErr.Error()
	}
	if err := os.WriteFile(filepath.Join(out, "error.txt"), []byte(message), 0o644); err != nil {
		t.Fatal(err)
	}
}

// oracleObject is the written object without what is random or the clock; a MachineConfig's
// spec.config also goes, byte for byte, to config-<name>.json.
func oracleObject(t *testing.T, out string, obj runtime.Object) json.RawMessage {
	switch obj := obj.DeepCopyObject().(type) {
	case *mcfgv1.MachineConfig:
		obj.UID = ""
		if err := os.WriteFile(filepath.Join(out, "config-"+obj.Name+".json"), obj.Spec.Config.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
		obj.Spec.Config.Raw = nil
		return mustJSON(t, obj)
	case *mcfgv1.KubeletConfig:
		for i := range obj.Status.Conditions {
			obj.Status.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return mustJSON(t, obj)
	default:
		return mustJSON(t, obj)
	}
}

func mustJSON(t *testing.T, v interface{}) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeJSON(t *testing.T, path string, v interface{}) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// What the kubelet config and container runtime config oracles share: the cases, and recording
// what one sync wrote. Copied into both controller packages with their package name (see
// README.md).
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
)

// oracleInput is a case's input.yaml: the cluster and the name of the object to sync.
type oracleInput struct {
	ControllerConfig        *mcfgv1.ControllerConfig         `json:"controllerConfig"`
	Pools                   []*mcfgv1.MachineConfigPool      `json:"pools"`
	KubeletConfigs          []*mcfgv1.KubeletConfig          `json:"kubeletConfigs"`
	ContainerRuntimeConfigs []*mcfgv1.ContainerRuntimeConfig `json:"containerRuntimeConfigs"`
	MachineConfigs          []*mcfgv1.MachineConfig          `json:"machineConfigs"`
	APIServer               *osev1.APIServer                 `json:"apiServer"`
	NodeConfig              *osev1.Node                      `json:"nodeConfig"`
	FeatureGates            struct {
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

// oracleCases runs `run` on every case directory under MCO_ORACLE_CASES, with its input.yaml.
func oracleCases(t *testing.T, run func(t *testing.T, dir string, input *oracleInput)) {
	root := os.Getenv("MCO_ORACLE_CASES")
	if root == "" {
		t.Skip("MCO_ORACLE_CASES not set")
	}
	inputs, err := filepath.Glob(filepath.Join(root, "*", "input.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no cases under %s: %v", root, err)
	}
	for _, path := range inputs {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			input := new(oracleInput)
			if err := yaml.UnmarshalStrict(raw, input); err != nil {
				t.Fatal(err)
			}
			run(t, dir, input)
		})
	}
}

// oracleCompleted marks a ControllerConfig as the template controller leaves it once it has run.
func oracleCompleted(cc *mcfgv1.ControllerConfig) *mcfgv1.ControllerConfig {
	cc.Status.Conditions = []mcfgv1.ControllerConfigStatusCondition{
		{Type: mcfgv1.TemplateControllerCompleted, Status: corev1.ConditionTrue},
		{Type: mcfgv1.TemplateControllerRunning, Status: corev1.ConditionFalse},
		{Type: mcfgv1.TemplateControllerFailing, Status: corev1.ConditionFalse},
	}
	return cc
}

// recordSync writes expected/ of a case: the writes among `all`, and the error of the sync.
func recordSync(t *testing.T, dir string, all []core.Action, syncErr error) {
	out := filepath.Join(dir, "expected")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var actions []oracleAction
	for _, action := range all {
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
	oracleWriteJSON(t, filepath.Join(out, "actions.json"), actions)
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
		return oracleJSON(t, obj)
	case *mcfgv1.KubeletConfig:
		for i := range obj.Status.Conditions {
			obj.Status.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return oracleJSON(t, obj)
	case *mcfgv1.ContainerRuntimeConfig:
		for i := range obj.Status.Conditions {
			obj.Status.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return oracleJSON(t, obj)
	default:
		return oracleJSON(t, obj)
	}
}

func oracleJSON(t *testing.T, v interface{}) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func oracleWriteJSON(t *testing.T, path string, v interface{}) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

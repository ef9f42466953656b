// Oracle for mco-kubeletconfig's KubeletConfig cases: runs the original kubelet config
// controller's sync (pkg/controller/kubelet-config, with its fake clients) on each case's
// input.yaml and writes what it did to the case's expected/ directory (see common_test.go and
// README.md).
//
// input.yaml holds: controllerConfig, pools, kubeletConfigs (every KubeletConfig of the cluster),
// machineConfigs (those that exist), apiServer, nodeConfig, featureGates {enabled, disabled} and
// sync (the name of the KubeletConfig to sync).
package kubeletconfig

import (
	"testing"

	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
)

func TestOracle(t *testing.T) {
	oracleCases(t, func(t *testing.T, dir string, in *oracleInput) {
		f := newFixture(t)
		f.ccLister = append(f.ccLister, oracleCompleted(in.ControllerConfig))
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
		recordSync(t, dir, f.client.Actions(), syncErr)
	})
}

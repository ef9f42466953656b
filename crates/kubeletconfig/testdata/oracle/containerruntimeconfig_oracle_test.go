// Oracle for mco-kubeletconfig's ContainerRuntimeConfig cases: runs the original container
// runtime config controller's sync (pkg/controller/container-runtime-config, with its fake
// clients) on each case's input.yaml and writes what it did to the case's expected/ directory
// (see common_test.go and README.md).
//
// input.yaml holds: controllerConfig, pools, containerRuntimeConfigs (every one of the cluster),
// machineConfigs (those that exist), featureGates {enabled, disabled} and sync (the name of the
// ContainerRuntimeConfig to sync).
package containerruntimeconfig

import (
	"testing"

	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
)

func TestOracle(t *testing.T) {
	oracleCases(t, func(t *testing.T, dir string, in *oracleInput) {
		f := newFixture(t)
		f.fgHandler = ctrlcommon.NewFeatureGatesHardcodedHandler(in.FeatureGates.Enabled, in.FeatureGates.Disabled)
		f.ccLister = append(f.ccLister, oracleCompleted(in.ControllerConfig))
		f.mcpLister = append(f.mcpLister, in.Pools...)
		for _, crc := range in.ContainerRuntimeConfigs {
			f.mccrLister = append(f.mccrLister, crc)
			f.objects = append(f.objects, crc)
		}
		for _, mc := range in.MachineConfigs {
			f.objects = append(f.objects, mc)
		}
		c := f.newController()
		syncErr := c.syncHandler(in.Sync)
		recordSync(t, dir, f.client.Actions(), syncErr)
	})
}

// kubectl, as built by upstream cmd/kubectl (a main package cannot be imported, so its few lines are
// repeated here): the lab applies mco's kustomize manifests with it, and users get a kubectl of the
// lab's Kubernetes version.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}

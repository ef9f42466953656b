// crd-check validates CRDs the way kube-apiserver does when they are created, then checks that
// each object of a fixtures directory passes the CRD's schema validation and loses no field to
// structural pruning (a field the schema does not know is silently dropped by the API server).
//
// Usage (from crates/api):
//
//	cargo run -q --example crds > /tmp/crds.yaml
//	(cd tools/crd-check && go run . /tmp/crds.yaml ../../tests/fixtures)
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func docs(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, doc := range strings.Split("\n"+string(data), "\n---\n") {
		if strings.TrimSpace(strings.Join(nonComment(doc), "")) != "" {
			out = append(out, doc)
		}
	}
	return out
}

func nonComment(doc string) []string {
	var lines []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

func main() {
	scheme := runtime.NewScheme()
	_ = apiextensions.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	failed := false
	crds := map[string]*apiextensions.CustomResourceDefinition{}
	for _, doc := range docs(os.Args[1]) {
		var v1 apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict([]byte(doc), &v1); err != nil {
			fmt.Println("decode:", err)
			failed = true
			continue
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&v1)
		var internal apiextensions.CustomResourceDefinition
		if err := scheme.Convert(&v1, &internal, nil); err != nil {
			panic(err)
		}
		errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal)
		fmt.Printf("%s: %d errors\n", v1.Name, len(errs))
		for _, e := range errs {
			fmt.Println("  ", e)
			failed = true
		}
		crds[internal.Spec.Names.Kind] = &internal
	}
	var files []string
	if len(os.Args) > 2 {
		files, _ = filepath.Glob(os.Args[2] + "/*.yaml")
	}
	for _, f := range files {
		for i, doc := range docs(f) {
			var obj map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				panic(err)
			}
			kind, _ := obj["kind"].(string)
			crd := crds[kind]
			if crd == nil {
				fmt.Printf("%s[%d]: no CRD for %q\n", f, i, kind)
				continue
			}
			schema := crd.Spec.Validation.OpenAPIV3Schema
			if schema == nil {
				schema = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
			}
			s, err := structuralschema.NewStructural(schema)
			if err != nil {
				panic(err)
			}
			pruned := pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			validator, _, err := apiservervalidation.NewSchemaValidator(schema)
			if err != nil {
				panic(err)
			}
			errs := apiservervalidation.ValidateCustomResource(nil, obj, validator)
			fmt.Printf("%s[%d] %s: pruned %v, %d errors\n", filepath.Base(f), i, kind, pruned, len(errs))
			for _, e := range errs {
				fmt.Println("  ", e)
			}
			if len(pruned) > 0 || len(errs) > 0 {
				failed = true
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

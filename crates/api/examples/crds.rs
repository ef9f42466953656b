//! Prints the CRDs of every API type as one multi-document YAML stream, e.g. for
//! `kubectl apply -f -` or for `tools/crd-check`.

fn main() {
    print!("{}", mco_api::crds_yaml());
}

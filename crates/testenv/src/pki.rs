//! Certificates of one test cluster: a CA, the API server's serving certificate (for 127.0.0.1, its
//! advertised address and the `kubernetes` Service), its client certificate towards kubelets,
//! an administrator client certificate in `system:masters`, client certificates for other users
//! on demand, and the service-account signing key.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// PEM texts of everything the API server and its client need, and the CA to sign more with.
pub(crate) struct Pki {
    issuer: Issuer<'static, KeyPair>,
    pub ca_cert: String,
    pub serving_cert: String,
    pub serving_key: String,
    pub client_cert: String,
    pub client_key: String,
    pub service_account_key: String,
    pub service_account_public_key: String,
    /// The API server's identity towards kubelets (logs, exec, port-forward).
    pub kubelet_client_cert: String,
    pub kubelet_client_key: String,
}

use crate::KUBERNETES_SERVICE_IP;

/// The group the API server's default RBAC grants everything to.
const ADMIN_GROUP: &str = "system:masters";

impl Pki {
    /// `advertise_address` is where pods reach the API server (also through the `kubernetes`
    /// Service's address): both are in the serving certificate.
    pub(crate) fn generate(advertise_address: IpAddr) -> Result<Pki, rcgen::Error> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name.push(DnType::CommonName, "mco-testenv-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key)?.pem();
        let issuer = Issuer::new(ca_params, ca_key);
        // The client connects to the IP: Go's generated self-signed certificate has no such name.
        let (serving_cert, serving_key) = leaf(
            &issuer,
            vec![
                "127.0.0.1".into(),
                "localhost".into(),
                advertise_address.to_string(),
                KUBERNETES_SERVICE_IP.to_string(),
                "kubernetes.default.svc".into(),
            ],
            "kube-apiserver",
            None,
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (client_cert, client_key) =
            leaf(&issuer, Vec::new(), "mco-testenv-admin", Some(ADMIN_GROUP), ExtendedKeyUsagePurpose::ClientAuth)?;
        let (kubelet_client_cert, kubelet_client_key) = leaf(
            &issuer,
            Vec::new(),
            "kube-apiserver-kubelet-client",
            Some(ADMIN_GROUP),
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let service_account = KeyPair::generate()?;
        Ok(Pki {
            issuer,
            ca_cert,
            serving_cert,
            serving_key,
            client_cert,
            client_key,
            service_account_key: service_account.serialize_pem(),
            service_account_public_key: service_account.public_key_pem(),
            kubelet_client_cert,
            kubelet_client_key,
        })
    }

    /// A client certificate and key (PEM) for `user`, in `group` if given.
    pub(crate) fn client(&self, user: &str, group: Option<&str>) -> Result<(String, String), rcgen::Error> {
        leaf(&self.issuer, Vec::new(), user, group, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

fn leaf(
    issuer: &Issuer<'static, KeyPair>,
    sans: Vec<String>,
    common_name: &str,
    group: Option<&str>,
    usage: ExtendedKeyUsagePurpose,
) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(sans)?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    if let Some(group) = group {
        params.distinguished_name.push(DnType::OrganizationName, group);
    }
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

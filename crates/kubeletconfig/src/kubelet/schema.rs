//! The Go types of `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration` (as vendored by the
//! original, k8s.io/kubelet v0.36): JSON names, `omitempty`, and the Go kinds that decide how
//! `encoding/json` reads and writes each field and how `mergo` merges it.

/// How a Go type behaves under `encoding/json` and `mergo`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Bool,
    /// A signed integer type of `bits` bits named `name` (`int32`).
    Int {
        bits: u32,
        name: &'static str,
    },
    /// An unsigned 32-bit integer type named `name` (`uint32`, `v1.VerbosityLevel`).
    Uint32 {
        name: &'static str,
    },
    Float64,
    /// A string type named `name` (`string`, `v1beta1.MemoryReservationPolicy`).
    Str {
        name: &'static str,
    },
    /// `metav1.Duration`: a JSON string (`"1m0s"`).
    Duration,
    /// logsapi `TimeOrMetaDuration`: nanoseconds as a number, or a duration string, written
    /// back the way it was read.
    NanosOrDuration,
    /// `resource.Quantity` / `QuantityValue`, kept as written (zero is `"0"`).
    Quantity,
    /// `metav1.Time`, kept as written.
    Time,
    Struct(&'static GoStruct),
    Ptr(&'static Kind),
    /// A slice type named `name` (`[]string`).
    Slice {
        name: &'static str,
        elem: &'static Kind,
    },
    /// A map with string keys, named `name` (`map[string]string`).
    Map {
        name: &'static str,
        elem: &'static Kind,
    },
}

/// A Go struct type.
#[derive(Debug)]
pub(crate) struct GoStruct {
    /// The type's name as Go's JSON errors print the innermost struct (`KubeletConfiguration`).
    pub name: &'static str,
    /// The type as `reflect.Type.String()` prints it (`v1beta1.KubeletConfiguration`).
    pub go_type: &'static str,
    pub fields: &'static [Field],
}

/// A struct field: JSON name, kind, `omitempty`.
#[derive(Debug)]
pub(crate) struct Field {
    pub json: &'static str,
    pub kind: Kind,
    pub omitempty: bool,
}

impl Kind {
    /// The type Go's `UnmarshalTypeError` names (pointers name their element).
    pub fn go_type(&self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int { name, .. } | Kind::Uint32 { name } | Kind::Str { name } => name,
            Kind::Float64 => "float64",
            Kind::Duration => "v1.Duration",
            Kind::NanosOrDuration => "v1.TimeOrMetaDuration",
            Kind::Quantity => "resource.Quantity",
            Kind::Time => "v1.Time",
            Kind::Struct(s) => s.go_type,
            Kind::Ptr(elem) => elem.go_type(),
            Kind::Slice { name, .. } | Kind::Map { name, .. } => name,
        }
    }
}

const fn f(json: &'static str, kind: Kind) -> Field {
    Field { json, kind, omitempty: true }
}

/// A field without `omitempty`: always written.
const fn always(json: &'static str, kind: Kind) -> Field {
    Field { json, kind, omitempty: false }
}

const BOOL: Kind = Kind::Bool;
const INT32: Kind = Kind::Int { bits: 32, name: "int32" };
const INT64: Kind = Kind::Int { bits: 64, name: "int64" };
const STRING: Kind = Kind::Str { name: "string" };
const VERBOSITY: Kind = Kind::Uint32 { name: "v1.VerbosityLevel" };
const STRINGS: Kind = Kind::Slice { name: "[]string", elem: &STRING };
const STRING_MAP: Kind = Kind::Map { name: "map[string]string", elem: &STRING };
const PTR_BOOL: Kind = Kind::Ptr(&BOOL);
const PTR_INT32: Kind = Kind::Ptr(&INT32);
const PTR_INT64: Kind = Kind::Ptr(&INT64);
const PTR_DURATION: Kind = Kind::Ptr(&Kind::Duration);

const fn named(name: &'static str) -> Kind {
    Kind::Str { name }
}

const fn strukt(s: &'static GoStruct) -> Kind {
    Kind::Struct(s)
}

/// A struct type of package `$package` (as Go's errors print it) named `$name`.
macro_rules! go_struct {
    ($id:ident, $package:literal, $name:literal, $fields:expr) => {
        static $id: GoStruct = GoStruct { name: $name, go_type: concat!($package, ".", $name), fields: $fields };
    };
}

go_struct!(X509, "v1beta1", "KubeletX509Authentication", &[f("clientCAFile", STRING)]);
go_struct!(
    WEBHOOK_AUTHENTICATION,
    "v1beta1",
    "KubeletWebhookAuthentication",
    &[f("enabled", PTR_BOOL), f("cacheTTL", Kind::Duration)]
);
go_struct!(ANONYMOUS, "v1beta1", "KubeletAnonymousAuthentication", &[f("enabled", PTR_BOOL)]);
go_struct!(
    AUTHENTICATION,
    "v1beta1",
    "KubeletAuthentication",
    &[
        always("x509", strukt(&X509)),
        always("webhook", strukt(&WEBHOOK_AUTHENTICATION)),
        always("anonymous", strukt(&ANONYMOUS)),
    ]
);
go_struct!(
    WEBHOOK_AUTHORIZATION,
    "v1beta1",
    "KubeletWebhookAuthorization",
    &[f("cacheAuthorizedTTL", Kind::Duration), f("cacheUnauthorizedTTL", Kind::Duration)]
);
go_struct!(
    AUTHORIZATION,
    "v1beta1",
    "KubeletAuthorization",
    &[f("mode", named("v1beta1.KubeletAuthorizationMode")), always("webhook", strukt(&WEBHOOK_AUTHORIZATION))]
);
go_struct!(MEMORY_SWAP, "v1beta1", "MemorySwapConfiguration", &[f("swapBehavior", STRING)]);
go_struct!(CRASH_LOOP_BACK_OFF, "v1beta1", "CrashLoopBackOffConfig", &[f("maxContainerRestartPeriod", PTR_DURATION)]);
go_struct!(
    SHUTDOWN_BY_PRIORITY,
    "v1beta1",
    "ShutdownGracePeriodByPodPriority",
    &[always("priority", INT32), always("shutdownGracePeriodSeconds", INT64)]
);
go_struct!(
    MEMORY_RESERVATION,
    "v1beta1",
    "MemoryReservation",
    &[always("numaNode", INT32), always("limits", Kind::Map { name: "v1.ResourceList", elem: &Kind::Quantity }),]
);
go_struct!(
    TAINT,
    "v1",
    "Taint",
    &[
        always("key", STRING),
        f("value", STRING),
        always("effect", named("v1.TaintEffect")),
        f("timeAdded", Kind::Ptr(&Kind::Time)),
    ]
);
go_struct!(
    TRACING,
    "v1",
    "TracingConfiguration",
    &[f("endpoint", Kind::Ptr(&STRING)), f("samplingRatePerMillion", PTR_INT32)]
);
go_struct!(USER_NAMESPACES, "v1beta1", "UserNamespaces", &[f("idsPerPod", PTR_INT64)]);
go_struct!(VMODULE_ITEM, "v1", "VModuleItem", &[always("filePattern", STRING), always("verbosity", VERBOSITY)]);
/// `OutputRoutingOptions`, which `TextOptions` and `JSONOptions` inline.
const OUTPUT_ROUTING: &[Field] = &[f("splitStream", BOOL), f("infoBufferSize", Kind::Quantity)];
go_struct!(TEXT_OPTIONS, "v1", "TextOptions", OUTPUT_ROUTING);
go_struct!(JSON_OPTIONS, "v1", "JSONOptions", OUTPUT_ROUTING);
go_struct!(
    FORMAT_OPTIONS,
    "v1",
    "FormatOptions",
    &[f("text", strukt(&TEXT_OPTIONS)), f("json", strukt(&JSON_OPTIONS))]
);
go_struct!(
    LOGGING,
    "v1",
    "LoggingConfiguration",
    &[
        f("format", STRING),
        always("flushFrequency", Kind::NanosOrDuration),
        always("verbosity", VERBOSITY),
        f("vmodule", Kind::Slice { name: "v1.VModuleConfiguration", elem: &strukt(&VMODULE_ITEM) }),
        f("options", strukt(&FORMAT_OPTIONS)),
    ]
);

/// `KubeletConfiguration`, fields in Go's order (its inlined `TypeMeta` first).
pub(crate) static KUBELET_CONFIGURATION: GoStruct = GoStruct {
    name: "KubeletConfiguration",
    go_type: "v1beta1.KubeletConfiguration",
    fields: &[
        f("kind", STRING),
        f("apiVersion", STRING),
        f("enableServer", PTR_BOOL),
        f("staticPodPath", STRING),
        f("podLogsDir", STRING),
        f("syncFrequency", Kind::Duration),
        f("fileCheckFrequency", Kind::Duration),
        f("httpCheckFrequency", Kind::Duration),
        f("staticPodURL", STRING),
        f("staticPodURLHeader", Kind::Map { name: "map[string][]string", elem: &STRINGS }),
        f("address", STRING),
        f("port", INT32),
        f("readOnlyPort", INT32),
        f("tlsCertFile", STRING),
        f("tlsPrivateKeyFile", STRING),
        f("tlsCipherSuites", STRINGS),
        f("tlsCurvePreferences", Kind::Slice { name: "[]int32", elem: &INT32 }),
        f("tlsMinVersion", STRING),
        f("rotateCertificates", BOOL),
        f("serverTLSBootstrap", BOOL),
        always("authentication", strukt(&AUTHENTICATION)),
        always("authorization", strukt(&AUTHORIZATION)),
        f("registryPullQPS", PTR_INT32),
        f("registryBurst", INT32),
        f("imagePullCredentialsVerificationPolicy", named("v1beta1.ImagePullCredentialsVerificationPolicy")),
        f("preloadedImagesVerificationAllowlist", STRINGS),
        f("eventRecordQPS", PTR_INT32),
        f("eventBurst", INT32),
        f("enableDebuggingHandlers", PTR_BOOL),
        f("enableContentionProfiling", BOOL),
        f("healthzPort", PTR_INT32),
        f("healthzBindAddress", STRING),
        f("oomScoreAdj", PTR_INT32),
        f("clusterDomain", STRING),
        f("clusterDNS", STRINGS),
        f("streamingConnectionIdleTimeout", Kind::Duration),
        f("nodeStatusUpdateFrequency", Kind::Duration),
        f("nodeStatusReportFrequency", Kind::Duration),
        f("nodeLeaseDurationSeconds", INT32),
        f("imageMinimumGCAge", Kind::Duration),
        f("imageMaximumGCAge", Kind::Duration),
        f("imageGCHighThresholdPercent", PTR_INT32),
        f("imageGCLowThresholdPercent", PTR_INT32),
        f("volumeStatsAggPeriod", Kind::Duration),
        f("kubeletCgroups", STRING),
        f("systemCgroups", STRING),
        f("cgroupRoot", STRING),
        f("cgroupsPerQOS", PTR_BOOL),
        f("cgroupDriver", STRING),
        f("cpuManagerPolicy", STRING),
        f("singleProcessOOMKill", PTR_BOOL),
        f("cpuManagerPolicyOptions", STRING_MAP),
        f("cpuManagerReconcilePeriod", Kind::Duration),
        f("memoryManagerPolicy", STRING),
        f("topologyManagerPolicy", STRING),
        f("topologyManagerScope", STRING),
        f("topologyManagerPolicyOptions", STRING_MAP),
        f("qosReserved", STRING_MAP),
        f("runtimeRequestTimeout", Kind::Duration),
        f("hairpinMode", STRING),
        f("maxPods", INT32),
        f("podCIDR", STRING),
        f("podPidsLimit", PTR_INT64),
        f("resolvConf", Kind::Ptr(&STRING)),
        f("runOnce", BOOL),
        f("cpuCFSQuota", PTR_BOOL),
        f("cpuCFSQuotaPeriod", PTR_DURATION),
        f("nodeStatusMaxImages", PTR_INT32),
        f("maxOpenFiles", INT64),
        f("contentType", STRING),
        f("kubeAPIQPS", PTR_INT32),
        f("kubeAPIBurst", INT32),
        f("serializeImagePulls", PTR_BOOL),
        f("maxParallelImagePulls", PTR_INT32),
        f("evictionHard", STRING_MAP),
        f("evictionSoft", STRING_MAP),
        f("evictionSoftGracePeriod", STRING_MAP),
        f("evictionPressureTransitionPeriod", Kind::Duration),
        f("evictionMaxPodGracePeriod", INT32),
        f("evictionMinimumReclaim", STRING_MAP),
        f("mergeDefaultEvictionSettings", PTR_BOOL),
        f("podsPerCore", INT32),
        f("enableControllerAttachDetach", PTR_BOOL),
        f("protectKernelDefaults", BOOL),
        f("makeIPTablesUtilChains", PTR_BOOL),
        f("iptablesMasqueradeBit", PTR_INT32),
        f("iptablesDropBit", PTR_INT32),
        f("featureGates", Kind::Map { name: "map[string]bool", elem: &BOOL }),
        f("failSwapOn", PTR_BOOL),
        f("memorySwap", strukt(&MEMORY_SWAP)),
        f("containerLogMaxSize", STRING),
        f("containerLogMaxFiles", PTR_INT32),
        f("containerLogMaxWorkers", PTR_INT32),
        f("containerLogMonitorInterval", PTR_DURATION),
        f("configMapAndSecretChangeDetectionStrategy", named("v1beta1.ResourceChangeDetectionStrategy")),
        f("systemReserved", STRING_MAP),
        f("kubeReserved", STRING_MAP),
        f("reservedSystemCPUs", STRING),
        f("showHiddenMetricsForVersion", STRING),
        f("systemReservedCgroup", STRING),
        f("kubeReservedCgroup", STRING),
        f("enforceNodeAllocatable", STRINGS),
        f("allowedUnsafeSysctls", STRINGS),
        f("volumePluginDir", STRING),
        f("providerID", STRING),
        f("kernelMemcgNotification", BOOL),
        f("logging", strukt(&LOGGING)),
        f("enableSystemLogHandler", PTR_BOOL),
        f("enableSystemLogQuery", PTR_BOOL),
        f("shutdownGracePeriod", Kind::Duration),
        f("shutdownGracePeriodCriticalPods", Kind::Duration),
        f(
            "shutdownGracePeriodByPodPriority",
            Kind::Slice { name: "[]v1beta1.ShutdownGracePeriodByPodPriority", elem: &strukt(&SHUTDOWN_BY_PRIORITY) },
        ),
        f("crashLoopBackOff", strukt(&CRASH_LOOP_BACK_OFF)),
        f("reservedMemory", Kind::Slice { name: "[]v1beta1.MemoryReservation", elem: &strukt(&MEMORY_RESERVATION) }),
        f("enableProfilingHandler", PTR_BOOL),
        f("enableDebugFlagsHandler", PTR_BOOL),
        f("seccompDefault", PTR_BOOL),
        f("memoryThrottlingFactor", Kind::Ptr(&Kind::Float64)),
        f("memoryReservationPolicy", named("v1beta1.MemoryReservationPolicy")),
        f("registerWithTaints", Kind::Slice { name: "[]v1.Taint", elem: &strukt(&TAINT) }),
        f("registerNode", PTR_BOOL),
        f("tracing", Kind::Ptr(&strukt(&TRACING))),
        f("localStorageCapacityIsolation", PTR_BOOL),
        always("containerRuntimeEndpoint", STRING),
        f("imageServiceEndpoint", STRING),
        f("failCgroupV1", PTR_BOOL),
        f("userNamespaces", Kind::Ptr(&strukt(&USER_NAMESPACES))),
    ],
};

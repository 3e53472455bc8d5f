//! The allowed-registries policy as bundle-unpacker applies it: to the
//! bundle image before any pull, and (when asked) to the operator images the
//! bundle's CSV names, before its content is stored. The rule type and the
//! matcher live in [`olm_oci::policy`], shared with catalog-operator.

pub use olm_oci::policy::RegistryRule;
use serde_json::Value;

/// Why a bundle image is refused: `None` when allowed (an empty policy
/// allows everything).
pub fn refusal(rules: &[RegistryRule], bundle_path: &str, registry: &str) -> Option<String> {
    olm_oci::policy::refusal(rules, "bundle image", bundle_path, registry)
}

/// Every image the CSVs among `objects` would run or declare: the
/// containers and init containers of their install strategy's Deployments,
/// and `spec.relatedImages`. Sorted, without duplicates.
pub fn operator_images(objects: &[Value]) -> Vec<String> {
    let mut images = Vec::new();
    for csv in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterServiceVersion")
    {
        let deployments = csv["spec"]["install"]["spec"]["deployments"].as_array();
        for deployment in deployments.into_iter().flatten() {
            let pod = &deployment["spec"]["template"]["spec"];
            for list in ["containers", "initContainers"] {
                for container in pod[list].as_array().into_iter().flatten() {
                    if let Some(image) = container["image"].as_str() {
                        images.push(image.to_owned());
                    }
                }
            }
        }
        for related in csv["spec"]["relatedImages"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(image) = related["image"].as_str() {
                images.push(image.to_owned());
            }
        }
    }
    images.retain(|i| !i.trim().is_empty());
    images.sort();
    images.dedup();
    images
}

/// Why a bundle is refused for the operator images it names: `None` when
/// every one is allowed. Names each refused image.
pub fn operator_image_refusal(
    rules: &[RegistryRule],
    bundle_path: &str,
    objects: &[Value],
) -> Option<String> {
    let refused: Vec<String> = operator_images(objects)
        .iter()
        .filter_map(|image| olm_oci::policy::image_refusal(rules, "operator image", image))
        .collect();
    (!refused.is_empty()).then(|| format!("bundle {bundle_path}: {}", refused.join("; ")))
}

//! Go's `omitempty` for the CSV types carried in `olm.csv.metadata`: the
//! olm-api types keep an empty list or string as written (to round-trip
//! CSVs), upstream's encoder drops them.

use olm_api::csv::{
    ApiServiceDescription, AppLink, CrdDescription, CustomResourceDefinitions, Descriptor,
    Maintainer,
};

use crate::property::CsvMetadata;

fn list<T>(v: &mut Option<Vec<T>>) {
    if v.as_ref().is_some_and(Vec::is_empty) {
        *v = None;
    }
}

fn text(v: &mut Option<String>) {
    if v.as_ref().is_some_and(String::is_empty) {
        *v = None;
    }
}

fn descriptors(v: &mut Option<Vec<Descriptor>>) {
    for d in v.iter_mut().flatten() {
        text(&mut d.display_name);
        text(&mut d.description);
        list(&mut d.x_descriptors);
    }
    list(v);
}

fn crd(d: &mut CrdDescription) {
    text(&mut d.display_name);
    text(&mut d.description);
    list(&mut d.resources);
    descriptors(&mut d.status_descriptors);
    descriptors(&mut d.spec_descriptors);
    descriptors(&mut d.action_descriptors);
}

fn api_service(d: &mut ApiServiceDescription) {
    text(&mut d.deployment_name);
    if d.container_port == Some(0) {
        d.container_port = None;
    }
    text(&mut d.display_name);
    text(&mut d.description);
    list(&mut d.resources);
    descriptors(&mut d.status_descriptors);
    descriptors(&mut d.spec_descriptors);
    descriptors(&mut d.action_descriptors);
}

fn link(l: &mut AppLink) {
    text(&mut l.name);
    text(&mut l.url);
}

fn maintainer(m: &mut Maintainer) {
    text(&mut m.name);
    text(&mut m.email);
}

fn crds(d: &mut CustomResourceDefinitions) {
    for c in d.owned.iter_mut().chain(d.required.iter_mut()).flatten() {
        crd(c);
    }
    list(&mut d.owned);
    list(&mut d.required);
}

pub(super) fn csv_metadata(m: &mut CsvMetadata) {
    crds(&mut m.custom_resource_definitions);
    let apis = &mut m.api_service_definitions;
    for a in apis
        .owned
        .iter_mut()
        .chain(apis.required.iter_mut())
        .flatten()
    {
        api_service(a);
    }
    list(&mut apis.owned);
    list(&mut apis.required);
    m.links.iter_mut().for_each(link);
    m.maintainers.iter_mut().for_each(maintainer);
    link(&mut m.provider);
}

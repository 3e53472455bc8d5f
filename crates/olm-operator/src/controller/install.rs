//! The install strategy carried out: the CSV's ServiceAccounts and RBAC (from
//! [`crate::decide::rbac::rbac_for_csv`]), its Deployments (from
//! [`crate::decide::deployment::build_deployments`]), then deletion of owned
//! Deployments the strategy no longer lists. Everything is server-side
//! applied by `olm-operator`, so running it again changes nothing.

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{Api, Client};
use olm_api::csv::ClusterServiceVersion;
use olm_runtime::apply::{apply, delete_if_exists};

use super::FIELD_MANAGER;
use crate::{
    Error,
    decide::{
        csv_phase::{InstallOutcome, IssuedCertificates},
        deployment::{DeploymentOverrides, build_deployments, orphaned_deployments},
        rbac::rbac_for_csv,
    },
};

/// The ServiceAccount every namespace has; OLM never applies it (InstallPlans
/// skip it too), only binds roles to it.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Applies the CSV's ServiceAccounts, Roles, RoleBindings, ClusterRoles and
/// ClusterRoleBindings.
pub(crate) async fn ensure_rbac(client: &Client, csv: &ClusterServiceVersion) -> Result<(), Error> {
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let Ok(by_account) = rbac_for_csv(csv) else {
        // An unusable strategy is reported by the decision; nothing to apply.
        return Ok(());
    };
    let service_accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let roles: Api<Role> = Api::namespaced(client.clone(), &namespace);
    let role_bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &namespace);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let cluster_role_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for (account, permissions) in by_account {
        if account != DEFAULT_SERVICE_ACCOUNT {
            apply(
                &service_accounts,
                &FIELD_MANAGER,
                &permissions.service_account,
            )
            .await
            .map_err(Error::runtime("cannot apply service account"))?;
        }
        for role in &permissions.roles {
            apply(&roles, &FIELD_MANAGER, role)
                .await
                .map_err(Error::runtime("cannot apply role"))?;
        }
        for binding in &permissions.role_bindings {
            apply(&role_bindings, &FIELD_MANAGER, binding)
                .await
                .map_err(Error::runtime("cannot apply role binding"))?;
        }
        for role in &permissions.cluster_roles {
            apply(&cluster_roles, &FIELD_MANAGER, role)
                .await
                .map_err(Error::runtime("cannot apply cluster role"))?;
        }
        for binding in &permissions.cluster_role_bindings {
            apply(&cluster_role_bindings, &FIELD_MANAGER, binding)
                .await
                .map_err(Error::runtime("cannot apply cluster role binding"))?;
        }
    }
    Ok(())
}

/// Runs the install strategy and reports how it went, as
/// [`crate::decide::csv_phase::after_install`] expects it.
pub(crate) async fn run_installer(
    client: &Client,
    csv: &ClusterServiceVersion,
    existing: &[Deployment],
    overrides: DeploymentOverrides<'_>,
    serving: super::serving::ServingInputs<'_>,
) -> InstallOutcome {
    match install(client, csv, existing, overrides, serving).await {
        Ok(certificates) => InstallOutcome::Installed { certificates },
        Err(error) => {
            let message = olm_runtime::events::error_chain(&error);
            if error.category() == "kube_forbidden" {
                InstallOutcome::Forbidden(message)
            } else {
                InstallOutcome::Failed(message)
            }
        }
    }
}

async fn install(
    client: &Client,
    csv: &ClusterServiceVersion,
    existing: &[Deployment],
    overrides: DeploymentOverrides<'_>,
    serving: super::serving::ServingInputs<'_>,
) -> Result<Option<IssuedCertificates>, Error> {
    ensure_rbac(client, csv).await?;
    // Services, certificates, APIServices and webhooks come first: the
    // Deployments mount the certificates and carry their CA's hash.
    let serving = super::serving::install(client, csv, serving).await?;
    let overrides = DeploymentOverrides {
        serving_certs: &serving.injections,
        ..overrides
    };
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    for deployment in build_deployments(csv, overrides)? {
        apply(&deployments, &FIELD_MANAGER, &deployment)
            .await
            .map_err(Error::runtime("cannot apply deployment"))?;
    }
    for orphan in orphaned_deployments(csv, existing) {
        tracing::info!(
            deployment = orphan,
            "deleting deployment no longer in the strategy"
        );
        delete_if_exists(&deployments, &orphan)
            .await
            .map_err(Error::runtime("cannot delete orphaned deployment"))?;
    }
    Ok(serving.certificates)
}

/**
 * The notes application as its entry serves it: root schema `notes` in two database
 * deployments. `personal`: one database per verified `sub`, seen by that user alone.
 * `teams`: one database per verified `org`, shared by the team's members. A token says
 * which with its verified `cairn_db` claim (`personal` or `teams`); nothing else can.
 */
import { type DeploymentDefinition } from "@cairn/server/engine/Deployment";
export declare const notesDeployment: DeploymentDefinition;

// Stand-in for actions/download-artifact (v4.3.0): by name (into `path`), or every artifact of
// the run matching `pattern` (each into path/<name>, or all into `path` with merge-multiple),
// through @actions/artifact's getArtifact/listArtifacts/downloadArtifact as the real action.
const path = require('path');
const os = require('os');
const core = require('@actions/core');
const { minimatch } = require('minimatch');
const { DefaultArtifactClient } = require('@actions/artifact');

async function run() {
  const name = core.getInput('name');
  const pattern = core.getInput('pattern');
  const merge = core.getInput('merge-multiple') === 'true';
  let where = core.getInput('path') || process.env.GITHUB_WORKSPACE || process.cwd();
  if (where.startsWith('~')) where = path.join(os.homedir(), where.slice(1));
  where = path.resolve(where);
  const client = new DefaultArtifactClient();
  if (name) {
    const { artifact } = await client.getArtifact(name);
    await client.downloadArtifact(artifact.id, { path: where });
    core.info(`Artifact ${name} was downloaded to ${where}`);
  } else {
    const { artifacts } = await client.listArtifacts({ latest: true });
    const chosen = pattern ? artifacts.filter((a) => minimatch(a.name, pattern)) : artifacts;
    for (const artifact of chosen) {
      const into = merge ? where : path.join(where, artifact.name);
      await client.downloadArtifact(artifact.id, { path: into });
    }
    core.info(`Total of ${chosen.length} artifact(s) downloaded to ${where}`);
  }
  core.setOutput('download-path', where);
}

run().catch((error) => core.setFailed(error.message));

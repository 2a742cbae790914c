// Stand-in for actions/upload-artifact (v4.6.2): its inputs, its search of the files to upload
// (the least common ancestor of the paths is the artifact's root) and @actions/artifact's
// uploadArtifact, as the real action calls it.
const path = require('path');
const fs = require('fs');
const core = require('@actions/core');
const glob = require('@actions/glob');
const { DefaultArtifactClient } = require('@actions/artifact');

function commonRoot(dirs) {
  let root = dirs[0].split(path.sep);
  for (const dir of dirs.slice(1)) {
    const parts = dir.split(path.sep);
    let i = 0;
    while (i < root.length && i < parts.length && root[i] === parts[i]) i++;
    root = root.slice(0, i);
  }
  return root.join(path.sep) || path.sep;
}

async function run() {
  const name = core.getInput('name') || 'artifact';
  const patterns = core.getInput('path', { required: true });
  const ifNone = core.getInput('if-no-files-found') || 'warn';
  const retention = parseInt(core.getInput('retention-days') || '', 10);
  const level = parseInt(core.getInput('compression-level') || '', 10);
  const overwrite = core.getInput('overwrite') === 'true';
  const hidden = core.getInput('include-hidden-files') === 'true';
  const globber = await glob.create(patterns, { implicitDescendants: true, excludeHiddenFiles: !hidden });
  const found = (await globber.glob()).filter((p) => fs.statSync(p).isFile());
  if (found.length === 0) {
    const message = `No files were found with the provided path: ${patterns}. No artifacts will be uploaded.`;
    if (ifNone === 'error') { core.setFailed(message); return; }
    if (ifNone === 'warn') core.warning(message); else core.info(message);
    return;
  }
  const searchPaths = globber.getSearchPaths();
  const root = searchPaths.length === 1 && fs.statSync(searchPaths[0]).isDirectory()
    ? searchPaths[0] : commonRoot(searchPaths.map((p) => (fs.statSync(p).isDirectory() ? p : path.dirname(p))));
  core.info(`With the provided path, there will be ${found.length} files uploaded`);
  const client = new DefaultArtifactClient();
  if (overwrite) {
    try { await client.deleteArtifact(name); } catch (error) { core.debug(error.message); }
  }
  const options = {};
  if (!Number.isNaN(retention)) options.retentionDays = retention;
  if (!Number.isNaN(level)) options.compressionLevel = level;
  const result = await client.uploadArtifact(name, found, root, options);
  core.info(`Artifact ${name} has been successfully uploaded! Final size is ${result.size} bytes. Artifact ID is ${result.id}`);
  core.setOutput('artifact-id', result.id);
  core.setOutput('artifact-digest', result.digest || '');
  const repo = process.env.GITHUB_REPOSITORY;
  core.setOutput('artifact-url', `${process.env.GITHUB_SERVER_URL}/${repo}/actions/runs/${process.env.GITHUB_RUN_ID}/artifacts/${result.id}`);
}

run().catch((error) => core.setFailed(error.message));

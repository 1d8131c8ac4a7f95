// hfjs.mjs runs one call of @huggingface/hub (Hugging Face's JavaScript client, not written
// here) for the Go tests of this folder, which compare what it does and reports with gotpu's
// hub package:
//
//   node hfjs.mjs COMMAND 'JSON ARGUMENTS'
//
// It prints one JSON line on stdout: the answer, made plain (paths relative, dates dropped) so
// that Go can compare it. Errors go to stderr with exit status 1. The library's own console
// logging ("Downloading x to y") goes to stderr, so stdout holds only the answer.
//
// Commands (repo is {"type": "model"|"dataset", "name": "org/name"}):
//   snapshot  {repo, hubUrl, cacheDir, revision?}       snapshotDownload → {path}
//   download  {repo, hubUrl, cacheDir, revision?, paths} downloadFileToCacheDir each → {paths}
//   scan      {cacheDir}                                 scanCacheDir → repos, size, warnings
//   api       {repo, hubUrl, revision?, paths}           modelInfo/datasetInfo, listFiles,
//                                                        pathsInfo, fileDownloadInfo
import { relative } from "node:path";
import {
  datasetInfo,
  downloadFileToCacheDir,
  fileDownloadInfo,
  listFiles,
  modelInfo,
  pathsInfo,
  scanCacheDir,
  snapshotDownload,
} from "@huggingface/hub";

for (const level of ["log", "info", "debug", "warn"]) {
  console[level] = (...args) => console.error(...args);
}

const commands = {
  async snapshot({ repo, hubUrl, cacheDir, revision }) {
    return { path: await snapshotDownload({ repo, hubUrl, cacheDir, revision }) };
  },

  async download({ repo, hubUrl, cacheDir, revision, paths }) {
    const out = [];
    // One at a time, as snapshotDownload does: the Go test reads the request log in order.
    for (const path of paths) {
      out.push(await downloadFileToCacheDir({ repo, hubUrl, cacheDir, revision, path }));
    }
    return { paths: out };
  },

  async scan({ cacheDir }) {
    const scan = await scanCacheDir(cacheDir);
    const repos = scan.repos.map((r) => ({
      id: r.id,
      path: r.path,
      filesCount: r.filesCount,
      size: r.size,
      revisions: r.revisions.map((v) => ({
        commitOid: v.commitOid,
        refs: [...v.refs].sort(),
        size: v.size,
        path: v.path,
        files: v.files
          .map((f) => ({ path: relative(v.path, f.path), blob: relative(r.path, f.blob.path), size: f.blob.size }))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
      })),
    }));
    repos.sort((a, b) => (a.path < b.path ? -1 : 1));
    return { repos, size: scan.size, warnings: scan.warnings.map(String) };
  },

  async api({ repo, hubUrl, revision, paths }) {
    const infoFn = repo.type === "dataset" ? datasetInfo : modelInfo;
    const info = await infoFn({ name: repo.name, hubUrl, revision, additionalFields: ["sha"] });
    const tree = [];
    for await (const e of listFiles({ repo, hubUrl, revision, recursive: true })) {
      tree.push({ type: e.type, path: e.path, oid: e.oid, size: e.size, lfs: e.lfs ?? null });
    }
    const infos = await pathsInfo({ repo, hubUrl, revision, paths, expand: true });
    const downloads = [];
    for (const path of paths) {
      const d = await fileDownloadInfo({ repo, hubUrl, revision, path });
      downloads.push(d && { path, etag: d.etag, size: d.size, xet: Boolean(d.xet) });
    }
    return {
      info: {
        name: info.name,
        sha: info.sha,
        private: info.private,
        gated: info.gated,
        downloads: info.downloads,
        likes: info.likes,
        updatedAt: info.updatedAt.toISOString(),
      },
      tree,
      pathsInfo: infos.map((p) => ({
        path: p.path,
        type: p.type,
        oid: p.oid,
        size: p.size,
        lfs: p.lfs ?? null,
        lastCommit: p.lastCommit ? p.lastCommit.id : null,
      })),
      downloads,
    };
  },
};

const [command, argText] = process.argv.slice(2);
try {
  if (!(command in commands)) {
    throw new Error(`unknown command ${JSON.stringify(command)}; want one of ${Object.keys(commands).join(", ")}`);
  }
  const answer = await commands[command](JSON.parse(argText ?? "{}"));
  process.stdout.write(JSON.stringify(answer) + "\n");
} catch (err) {
  process.stderr.write(`hfjs ${command}: ${err?.stack ?? err}\n`);
  process.exitCode = 1;
}

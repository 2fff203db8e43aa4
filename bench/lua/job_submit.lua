--[[
job_submit.lua: the rules of config/fairway.gpu-cluster.toml written by hand, as a
site would without Fairway, for `fairway-bench-submit`'s side-by-side comparison.

It covers what the benchmark's job mix exercises: the strict directive parser, the
memory model (weights/gradients/Adam bytes per parameter), default GPUs, tier QoS,
allowed QoS per partition, gang shape checks, --requeue for checkpointing jobs in
preemptible QoS, binding defaults and the prediction record. Two things it cannot do
on 22.05: set --signal (job_desc.warn_signal is read-only from Lua) and read the
runtime predictor, so it records "unknown".
--]]

local GPUS = {
   { name = "h100", memory_gb = 80, per_node = 8, domain = 8, partitions = { gpu = true } },
   { name = "a100", memory_gb = 80, per_node = 4, domain = 2, partitions = { gpu = true, a100 = true } },
}
local ALLOWED = {
   gpu = { normal = true, high = true, scavenger = true },
   a100 = { normal = true, high = true, scavenger = true, interactive = true },
   debug = { interactive = true, normal = true },
}
local TIER_QOS = { interactive = "interactive", batch = "normal", opportunistic = "scavenger" }
local PREEMPTIBLE = { scavenger = true }
local KEYS = { model = true, method = true, precision = true, seq = true, batch = true,
               ckpt = true, tier = true, time = true }
local USABLE = 0.9

local function parse_directive(text)
   if text == nil then return nil end
   local s = string.find(text, "fairway:", 1, true)
   if s == nil then return nil end
   local body = string.sub(text, s + 8)
   local semi = string.find(body, ";", 1, true)
   if semi then body = string.sub(body, 1, semi - 1) end
   if #body > 256 then return nil, "directive too long" end
   if string.find(body, "[^\t\32-\126]") then return nil, "use plain ASCII key=value words" end
   local d = {}
   for word in string.gmatch(body, "%S+") do
      local k, v = string.match(word, "^([^=]+)=(.*)$")
      if k == nil then return nil, "`" .. word .. "` is not key=value" end
      if not KEYS[k] then return nil, "unknown key `" .. k .. "`" end
      if d[k] ~= nil then return nil, "`" .. k .. "` is given twice" end
      d[k] = v
   end
   if d.model then
      local n, unit = string.match(d.model, "^([%d%.]+)([mbtMBT])$")
      if n == nil then return nil, "`model=" .. d.model .. "` is not valid" end
      local scale = ({ m = 1e6, b = 1e9, t = 1e12 })[string.lower(unit)]
      d.params = tonumber(n) * scale
   end
   if d.method and not ({ full = true, lora = true, qlora = true, infer = true })[d.method] then
      return nil, "`method=" .. d.method .. "` is not valid"
   end
   if d.tier and not TIER_QOS[d.tier] then return nil, "`tier=" .. d.tier .. "` is not valid" end
   if d.ckpt then
      local n, u = string.match(d.ckpt, "^(%d+)([smh]?)$")
      if n == nil then return nil, "`ckpt=" .. d.ckpt .. "` is not valid" end
      d.ckpt_s = tonumber(n) * (({ s = 1, m = 60, h = 3600 })[u] or 1)
   end
   return d
end

local function bytes_per_param(d)
   local prec = ({ fp32 = 4, bf16 = 2, fp16 = 2, fp8 = 1 })[d.precision or "bf16"] or 2
   local m = d.method or "full"
   if m == "full" then return 16 elseif m == "lora" then return prec + 0.3
   elseif m == "qlora" then return 0.85 else return prec end
end

local function gpu_request(tres)
   if tres == nil then return nil end
   for entry in string.gmatch(tres, "[^,]+") do
      local c = string.match(entry, "^gres:gpu:(%d+)$")
      if c then
         if tonumber(c) == 0 then return nil end -- --gres=gpu:0 asks for none
         return nil, tonumber(c)
      end
      local t
      t, c = string.match(entry, "^gres:gpu:([%w%-_%.]+):(%d+)$")
      if t then return t, tonumber(c) end
   end
   return nil
end

local function gpu_type(name)
   for _, g in ipairs(GPUS) do if g.name == name then return g end end
   return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local d, err = parse_directive(job_desc.comment)
   if err then
      slurm.log_user("fairway: %s", err)
      return slurm.ERROR
   end
   local gtype, count = gpu_request(job_desc.tres_per_node)
   local nodes = job_desc.min_nodes
   if nodes == nil or nodes == slurm.NO_VAL or nodes < 1 then nodes = 1 end
   if d and d.params then
      local need = d.params * bytes_per_param(d)
      if count == nil then
         local g = GPUS[1]
         local n = math.max(1, math.ceil(need / (g.memory_gb * 1e9 * USABLE)))
         if n <= g.per_node then
            local k = 1
            while k < n do k = k * 2 end
            job_desc.tres_per_node = "gres:gpu:" .. g.name .. ":" .. k
         else
            job_desc.tres_per_node = "gres:gpu:" .. g.name .. ":" .. g.per_node
            job_desc.min_nodes = math.ceil(n / g.per_node)
         end
         if job_desc.partition == nil then job_desc.partition = "gpu" end
         gtype, count = g.name, n
      else
         local g = gpu_type(gtype) or GPUS[1]
         local have = count * nodes * g.memory_gb * 1e9 * USABLE
         if have < need then
            slurm.log_user("fairway: needs about %.2f TB of GPU memory; you asked for %d x %s",
                           need / 1e12, count * nodes, g.name)
            return slurm.ERROR
         end
      end
   end
   if nodes > 1 and count ~= nil then
      local g = gpu_type(gtype)
      if g and not ((count <= g.domain and g.domain % count == 0) or count % g.domain == 0) then
         slurm.log_user("fairway: %d GPUs per node straddle NVLink domains", count)
         return slurm.ERROR
      end
      local tpn = job_desc.ntasks_per_node
      if tpn ~= nil and tpn ~= slurm.NO_VAL16 and tpn ~= count and tpn ~= 1 then
         slurm.log_user("fairway: --ntasks-per-node does not match GPUs per node")
         return slurm.ERROR
      end
   end
   if job_desc.qos == nil then
      local tier = (d and d.tier) or "batch"
      job_desc.qos = TIER_QOS[tier]
      slurm.log_user("fairway: QoS %s (%s tier)", job_desc.qos, tier)
   end
   local part = job_desc.partition or "debug"
   if ALLOWED[part] and not ALLOWED[part][job_desc.qos] then
      slurm.log_user("fairway: QoS %s is not allowed in partition %s", job_desc.qos, part)
      return slurm.ERROR
   end
   if d and d.ckpt_s and PREEMPTIBLE[job_desc.qos] and
      (job_desc.requeue == nil or job_desc.requeue == slurm.NO_VAL16) then
      job_desc.requeue = 1
   end
   if job_desc.tres_per_node ~= nil and job_desc.tres_bind == nil then
      job_desc.tres_bind = "gpu:closest"
   end
   job_desc.admin_comment = "fairway:predicted_runtime=unknown"
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

return slurm.SUCCESS

// The official Go admin client (pulsaradmin, apache/pulsar-client-go) driven line by line, so
// Magnetar's admin REST is checked against request and response shapes nobody here wrote.
//
// Each line on stdin is one JSON call, {"op": "topics.create", "topic": "...", ...}; each line
// on stdout is its answer, {"ok": true, "result": ...} or {"ok": false, "code": 412, "reason":
// "..."} with the HTTP status and reason the client's rest.Error carries (code 0: not an HTTP
// error, e.g. the client could not parse the answer).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

type call struct {
	Op             string            `json:"op"`
	Topic          string            `json:"topic"`
	Namespace      string            `json:"namespace"`
	Tenant         string            `json:"tenant"`
	Subscription   string            `json:"subscription"`
	Partitions     int               `json:"partitions"`
	Force          bool              `json:"force"`
	NonPartitioned bool              `json:"nonPartitioned"`
	LedgerID       int64             `json:"ledgerId"`
	EntryID        int64             `json:"entryId"`
	N              int64             `json:"n"`
	Position       string            `json:"position"` // "earliest", "latest" or "" (ledgerId/entryId)
	Clusters       []string          `json:"clusters"`
	Properties     map[string]string `json:"properties"`
	Value          int64             `json:"value"`
	Applied        bool              `json:"applied"`
	RetentionMin   int               `json:"retentionMinutes"`
	RetentionMB    int64             `json:"retentionMB"`
	LimitSize      int64             `json:"limitSize"`
	Policy         string            `json:"policy"`
	RateMsg        int64             `json:"rateMsg"`
	RateBytes      int64             `json:"rateBytes"`
	Active         bool              `json:"active"`
}

type answer struct {
	OK     bool        `json:"ok"`
	Result interface{} `json:"result,omitempty"`
	Code   int         `json:"code,omitempty"`
	Reason string      `json:"reason,omitempty"`
}

type message struct {
	ID         utils.MessageID   `json:"id"`
	BatchIndex int               `json:"batchIndex"`
	Payload    string            `json:"payload"`
	Properties map[string]string `json:"properties"`
}

func messages(found []*utils.Message) []message {
	out := make([]message, 0, len(found))
	for _, m := range found {
		out = append(out, message{m.MessageID, m.MessageID.BatchIndex, string(m.Payload), m.Properties})
	}
	return out
}

func (c call) position() utils.MessageID {
	switch c.Position {
	case "earliest":
		return utils.Earliest
	case "latest":
		return utils.Latest
	}
	return utils.MessageID{LedgerID: c.LedgerID, EntryID: c.EntryID, PartitionIndex: -1, BatchIndex: -1}
}

func run(admin pulsaradmin.Client, c call) (interface{}, error) {
	var topic *utils.TopicName
	if c.Topic != "" {
		var err error
		if topic, err = utils.GetTopicName(c.Topic); err != nil {
			return nil, err
		}
	}
	topics, subs := admin.Topics(), admin.Subscriptions()
	switch c.Op {
	case "topics.create":
		return nil, topics.CreateWithProperties(*topic, c.Partitions, c.Properties)
	case "topics.update":
		return nil, topics.Update(*topic, c.Partitions)
	case "topics.delete":
		return nil, topics.Delete(*topic, c.Force, c.NonPartitioned)
	case "topics.metadata":
		return topics.GetMetadata(*topic)
	case "topics.list":
		ns, err := utils.GetNamespaceName(c.Namespace)
		if err != nil {
			return nil, err
		}
		partitioned, plain, err := topics.List(*ns)
		return map[string][]string{"partitioned": partitioned, "nonPartitioned": plain}, err
	case "topics.terminate":
		return topics.Terminate(*topic)
	case "topics.lastMessageId":
		return topics.GetLastMessageID(*topic)
	case "topics.stats":
		return topics.GetStats(*topic)
	case "topics.internalStats":
		return topics.GetInternalStats(*topic)
	case "topics.unload":
		return nil, topics.Unload(*topic)
	case "subscriptions.create":
		return nil, subs.Create(*topic, c.Subscription, c.position())
	case "subscriptions.delete":
		if c.Force {
			return nil, subs.ForceDelete(*topic, c.Subscription)
		}
		return nil, subs.Delete(*topic, c.Subscription)
	case "subscriptions.list":
		return subs.List(*topic)
	case "subscriptions.resetToMessageId":
		return nil, subs.ResetCursorToMessageID(*topic, c.Subscription, c.position())
	case "subscriptions.resetToTimestamp":
		return nil, subs.ResetCursorToTimestamp(*topic, c.Subscription, c.N)
	case "subscriptions.clearBacklog":
		return nil, subs.ClearBacklog(*topic, c.Subscription)
	case "subscriptions.skip":
		return nil, subs.SkipMessages(*topic, c.Subscription, c.N)
	case "subscriptions.expire":
		return nil, subs.ExpireMessages(*topic, c.Subscription, c.N)
	case "subscriptions.peek":
		found, err := subs.PeekMessages(*topic, c.Subscription, int(c.N))
		return messages(found), err
	case "subscriptions.getMessageById":
		found, err := subs.GetMessagesByID(*topic, c.LedgerID, c.EntryID)
		return messages(found), err
	case "topics.setMessageTTL":
		return nil, topics.SetMessageTTL(*topic, int(c.Value))
	case "topics.getMessageTTL":
		return topics.GetMessageTTL(*topic)
	case "topics.removeMessageTTL":
		return nil, topics.RemoveMessageTTL(*topic)
	case "topics.setRetention":
		return nil, topics.SetRetention(*topic, utils.NewRetentionPolicies(c.RetentionMin, int(c.RetentionMB)))
	case "topics.getRetention":
		return topics.GetRetention(*topic, c.Applied)
	case "topics.setBacklogQuota":
		quota := utils.NewBacklogQuota(c.LimitSize, -1, utils.RetentionPolicy(c.Policy))
		return nil, topics.SetBacklogQuota(*topic, quota, utils.DestinationStorage)
	case "topics.getBacklogQuotaMap":
		return topics.GetBacklogQuotaMap(*topic, c.Applied)
	case "topics.removeBacklogQuota":
		return nil, topics.RemoveBacklogQuota(*topic, utils.DestinationStorage)
	case "topics.setMaxProducers":
		return nil, topics.SetMaxProducers(*topic, int(c.Value))
	case "topics.getMaxProducers":
		return topics.GetMaxProducers(*topic)
	case "topics.setMaxConsumers":
		return nil, topics.SetMaxConsumers(*topic, int(c.Value))
	case "topics.setPublishRate":
		rate := utils.PublishRateData{PublishThrottlingRateInMsg: c.RateMsg, PublishThrottlingRateInByte: c.RateBytes}
		return nil, topics.SetPublishRate(*topic, rate)
	case "topics.getPublishRate":
		return topics.GetPublishRate(*topic)
	case "topics.setDispatchRate":
		rate := utils.DispatchRateData{
			DispatchThrottlingRateInMsg: c.RateMsg, DispatchThrottlingRateInByte: c.RateBytes, RatePeriodInSecond: 1,
		}
		return nil, topics.SetDispatchRate(*topic, rate)
	case "topics.setDelayedDelivery":
		return nil, topics.SetDelayedDelivery(*topic, utils.DelayedDeliveryData{Active: c.Active, TickTime: 1000})
	case "topics.getDelayedDelivery":
		return topics.GetDelayedDelivery(*topic)
	case "namespaces.setMessageTTL":
		return nil, admin.Namespaces().SetNamespaceMessageTTL(c.Namespace, int(c.Value))
	case "namespaces.getMessageTTL":
		return admin.Namespaces().GetNamespaceMessageTTL(c.Namespace)
	case "namespaces.setRetention":
		policy := utils.NewRetentionPolicies(c.RetentionMin, int(c.RetentionMB))
		return nil, admin.Namespaces().SetRetention(c.Namespace, policy)
	case "namespaces.getRetention":
		return admin.Namespaces().GetRetention(c.Namespace)
	case "namespaces.setBacklogQuota":
		quota := utils.NewBacklogQuota(c.LimitSize, -1, utils.RetentionPolicy(c.Policy))
		return nil, admin.Namespaces().SetBacklogQuota(c.Namespace, quota, utils.DestinationStorage)
	case "namespaces.getBacklogQuotaMap":
		return admin.Namespaces().GetBacklogQuotaMap(c.Namespace)
	case "namespaces.setMaxProducersPerTopic", "namespaces.setPublishRate":
		ns, err := utils.GetNamespaceName(c.Namespace)
		if err != nil {
			return nil, err
		}
		if c.Op == "namespaces.setPublishRate" {
			rate := utils.PublishRate{PublishThrottlingRateInMsg: int(c.RateMsg), PublishThrottlingRateInByte: c.RateBytes}
			return nil, admin.Namespaces().SetPublishRate(*ns, rate)
		}
		return nil, admin.Namespaces().SetMaxProducersPerTopic(*ns, int(c.Value))
	case "tenants.create":
		return nil, admin.Tenants().Create(utils.TenantData{Name: c.Tenant, AllowedClusters: c.Clusters})
	case "tenants.update":
		return nil, admin.Tenants().Update(utils.TenantData{Name: c.Tenant, AllowedClusters: c.Clusters})
	case "tenants.get":
		return admin.Tenants().Get(c.Tenant)
	case "tenants.delete":
		return nil, admin.Tenants().Delete(c.Tenant)
	case "namespaces.create":
		return nil, admin.Namespaces().CreateNamespace(c.Namespace)
	case "namespaces.delete":
		return nil, admin.Namespaces().DeleteNamespace(c.Namespace)
	case "namespaces.list":
		return admin.Namespaces().GetNamespaces(c.Tenant)
	}
	return nil, fmt.Errorf("unknown op %q", c.Op)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: admin-go http://host:port   (calls as JSON lines on stdin)")
		os.Exit(2)
	}
	admin, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: os.Args[1]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c call
		var a answer
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			a = answer{Reason: "bad call: " + err.Error()}
		} else if result, err := run(admin, c); err != nil {
			a = answer{Reason: err.Error()}
			var restErr rest.Error
			if errors.As(err, &restErr) {
				a.Code, a.Reason = restErr.Code, restErr.Reason
			}
		} else {
			a = answer{OK: true, Result: result}
		}
		if err := out.Encode(a); err != nil {
			os.Exit(1)
		}
	}
}
